"""Human judgments of intent candidates, summarised per candidate (trajectory-mining spec §2.5)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .candidates import IntentCandidate


@dataclass(frozen=True, kw_only=True)
class IntentReview:
    candidate_id: str
    reviewer_id: str
    valid: bool


@dataclass(frozen=True, kw_only=True)
class IntentReviewSummary:
    candidate_id: str
    valid_reviews: int
    invalid_reviews: int
    reviewer_ids: tuple[str, ...]
    duplicate_reviewer_ids: tuple[str, ...]

    @property
    def agreement(self) -> float:
        """Share of the majority verdict, `max(valid, invalid) / (valid + invalid)`; 0.0 without reviews."""
        total = self.valid_reviews + self.invalid_reviews
        return max(self.valid_reviews, self.invalid_reviews) / total if total else 0.0


def summarize_intent_reviews(
    candidates: Iterable[IntentCandidate], reviews: Iterable[IntentReview]
) -> tuple[IntentReviewSummary, ...]:
    """One summary per candidate id (sorted), counting each reviewer's first review; no acceptance threshold."""
    verdicts: dict[str, dict[str, bool]] = {candidate.candidate_id: {} for candidate in candidates}
    duplicates: dict[str, list[str]] = {candidate_id: [] for candidate_id in verdicts}
    for review in reviews:
        if review.candidate_id not in verdicts:
            raise ValueError("intent review references an unknown candidate")
        if not isinstance(review.reviewer_id, str) or not review.reviewer_id.strip():
            raise ValueError("intent reviewer ID is required")
        counted = verdicts[review.candidate_id]
        if review.reviewer_id in counted:
            duplicates[review.candidate_id].append(review.reviewer_id)
        else:
            counted[review.reviewer_id] = bool(review.valid)
    summaries = []
    for candidate_id in sorted(verdicts):
        counted = verdicts[candidate_id]
        valid = sum(counted.values())
        summaries.append(
            IntentReviewSummary(
                candidate_id=candidate_id,
                valid_reviews=valid,
                invalid_reviews=len(counted) - valid,
                reviewer_ids=tuple(sorted(counted)),
                duplicate_reviewer_ids=tuple(sorted(duplicates[candidate_id])),
            )
        )
    return tuple(summaries)
