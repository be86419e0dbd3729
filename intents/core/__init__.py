"""Pure algorithms of intents: no Django import, no I/O."""

from .aggregate import IntentAggregate, aggregate_intents
from .candidates import (
    INTENT_MINING_VERSION,
    IntentCandidate,
    IntentEvidence,
    IntentKind,
    parse_intent_candidates,
    parse_intent_reply,
)
from .clustering import IntentCluster, IntentClustering, cluster_intents
from .drift import IntentClusterChange, IntentDriftReport, compare_intent_windows
from .embed import Embedder, HashedNgramEmbedder
from .normalize import normalize_intent
from .novelty import NovelIntent, detect_novel_intents
from .review import IntentReview, IntentReviewSummary, summarize_intent_reviews
from .vectors import validated_matrix

__all__ = [
    "INTENT_MINING_VERSION",
    "Embedder",
    "HashedNgramEmbedder",
    "IntentAggregate",
    "IntentCandidate",
    "IntentCluster",
    "IntentClusterChange",
    "IntentClustering",
    "IntentDriftReport",
    "IntentEvidence",
    "IntentKind",
    "IntentReview",
    "IntentReviewSummary",
    "NovelIntent",
    "aggregate_intents",
    "cluster_intents",
    "compare_intent_windows",
    "detect_novel_intents",
    "normalize_intent",
    "parse_intent_candidates",
    "parse_intent_reply",
    "summarize_intent_reviews",
    "validated_matrix",
]
