"""normalize_intent: the grouping key of an intent label (trajectory-mining spec §2.2)."""

import re
import unicodedata

_NON_WORD = re.compile(r"[\W_]+")


def normalize_intent(intent: str) -> str:
    """NFKC, casefold, every run of non-word characters or underscores to one space, then single spaces, trimmed."""
    folded = unicodedata.normalize("NFKC", intent).casefold()
    return " ".join(_NON_WORD.sub(" ", folded).split())
