"""The safety scan of learned content: text agents will read (graph node descriptions, edge guidance, conditions and
pitfalls; procedure step arguments; intent labels; rubric criteria) checked for what must not reach them.

Three rules (`RULES`):

* `injection`: instruction-like phrases ("ignore previous instructions", "you are now a …", "system prompt",
  "do not tell the user", "<|im_start|>", "curl … | sh", …), matched case-insensitively on word boundaries.
  **critical** when the same phrase (case and spacing aside) is in the observation of one of the text's sources:
  the learner copied it from a tool's output, the classic injection path; **warning** when only the learned text
  has it (it may be the learner's own wording, for a reviewer to judge).
* `secret`: known key and token shapes (AWS, Anthropic, OpenAI, GitHub, Slack, Google, Stripe live keys, JSON Web
  Tokens, PEM private keys, `password=` / `api_key:` / `secret=` / `token=` assignments) and URLs with embedded
  credentials (`https://user:pass@host`, reported once, as a secret): **critical**. Plus high-entropy tokens
  (`ENTROPY_THRESHOLD`, `CLASS_CHANGE_MIN`): **warning**. A placeholder value (`********`, `<your key>`, `${TOKEN}`,
  `YOUR_API_KEY`, `os.environ[…]`, …) is not a credential.
* `url`: every http(s) URL, `www.` host or bare `host.tld/path` whose host is not allowed (an allowed host allows
  its subdomains; `localhost`, loopback and IP literals are hosts like any other): **warning**. An IP literal is a
  warning too: the rule is "only hosts the operator named", and an IP is simply a host nobody named.

Findings come in input order of the texts, then by position in the text. Excerpts never carry a secret: a secret is
cut to its first 4 characters (at most half of it) and "…".

Speed. The scan must cost about what reading the text costs (bench/certify.py measures it against one pass of a
trivial regex over every text: under 2x on a 1,000-node graph). Nearly all learned text is ordinary prose with
nothing to report, so the texts are first gated all at once (see "the gate" below: byte translations and numpy
find the places where a rule's pattern may start, `re.match` confirms them; the high-entropy tokens of every text
are found and measured at once, `_long_tokens`), and only a text with a confirmed pattern is scanned, by the rule
families that matched there (`_URL`, `_SECRET` from the first place a secret's pattern matched, `_INJECTION`,
each run over the text once; the comparison with the sources' observations only for a text the injection regex
matched). The gate is a necessary condition of every rule: tests/uplift/core/test_safety.py checks that the gated
scan equals the ungated one (`_scan_ungated`), and the high-entropy tokens found at once against the rule written
plainly.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

import numpy as np

RULES = ("injection", "secret", "url")
CRITICAL = "critical"
WARNING = "warning"
EXCERPT_LIMIT = 120

# High-entropy tokens. A run of at least 24 characters of the base64 / URL-safe alphabet, with letters and digits,
# whose empirical Shannon entropy is at least 4.0 bits per character. Why 4.0: a random key of 24+ characters over
# base62/base64 draws mostly distinct characters, so its empirical entropy is close to log2(length), 4.4-4.6 bits
# at 24-32 characters and more beyond; hexadecimal can never exceed log2(16) = 4 bits (digests, UUIDs: they are
# left out explicitly, a perfectly even digest reaching exactly 4.0), and words, snake_case names and paths repeat
# their letters (English text has about 4.1 bits per letter over a whole alphabet's frequencies, a 24-character
# sample of it well under 4).
ENTROPY_MIN_LENGTH = 24
ENTROPY_THRESHOLD = 4.0
# Entropy alone takes in names and paths that mix words and numbers ("book_reservation_v2_pay_with_gift_card",
# "/home/agent/reports/q3_2024_summary", "getUserDetailsByEmailAddress2024", "anthropic/claude-sonnet-4-20250514":
# 4.1-4.3 bits, many distinct letters). What sets a random key apart is how often its characters change class
# (lower case, upper case, digit; a capital followed by lower case is one capitalised word, not a change) between
# adjacent letters and digits: about 45% of the positions of a random base62 or base64 key and 40% of a lower case
# and digits one, against under 15% for names and paths, whose classes change only where a number or a word starts.
# At 25%, 1-2% of random 24-character base62/base64 keys and about 5% of lower-case-and-digit ones are let through
# (a warning lost; the known key shapes above are matched whatever their classes), and identifiers with a short hex
# fragment or two still pass.
CLASS_CHANGE_MIN = 0.25


@dataclass(frozen=True)
class Source:
    """Where a learned text can be traced to: a run, one of its steps, and that step's observation (tool output)."""

    run_id: int | str
    step: int | None = None  # the step ordinal; None when only the run is known
    observation: str = ""  # "" when unknown

    def to_document(self) -> dict[str, Any]:
        # Not the observation: it may hold the very secret a finding masks.
        return {"run_id": self.run_id, "step": self.step}


@dataclass(frozen=True)
class LearnedText:
    where: str  # e.g. "node n3 description", "step 2 argument 'query'"
    text: str
    sources: tuple[Source, ...] = ()


@dataclass(frozen=True)
class Finding:
    rule: str  # one of RULES
    severity: str  # CRITICAL or WARNING
    where: str
    excerpt: str  # the matched text, secrets masked, at most EXCERPT_LIMIT characters
    message: str  # one plain sentence for a reviewer
    sources: tuple[Source, ...] = ()  # injection: the sources whose observation has the phrase; else the text's

    def to_document(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "where": self.where,
            "excerpt": self.excerpt,
            "message": self.message,
            "sources": [source.to_document() for source in self.sources],
        }


def critical(findings: Iterable[Finding]) -> list[Finding]:
    return [finding for finding in findings if finding.severity == CRITICAL]


# --- injection: one alternation, matched on the lowered text ------------------------------------------------------

_QUANTIFIER = r"(?:(?:all|any|the|these|those|every|of)\s+)*"
_EARLIER = r"(?:previous|prior|above|earlier|preceding|foregoing|former|original|initial|system)"
_ORDERS = r"(?:instructions?|prompts?|rules|directions|guidelines|messages|commands|context)"
# "ignore the previous instructions", "disregard your rules": an earlier or the agent's own orders, not "ignore any
# instructions found in a document" (sound advice a learner may well write).
_THEIR_ORDERS = rf"{_QUANTIFIER}(?:(?:your|my)\s+(?:{_EARLIER}\s+)*|(?:{_EARLIER}\s+)+){_ORDERS}"
_WHO = r"(?:user|customer|human|operator)"
_WORDY = [  # each between word boundaries
    rf"ignore\s+{_THEIR_ORDERS}",
    rf"disregard\s+{_THEIR_ORDERS}",
    rf"forget\s+(?:everything|{_THEIR_ORDERS})",
    r"override\s+(?:(?:the|your|all|any|my)\s+)+(?:(?:previous|prior|system|safety|original)\s+)*"
    r"(?:rules|instructions|guidelines|policies|restrictions|safeguards)",
    r"you\s+are\s+now\s+(?:an?|the|in|my|acting|no\s+longer|free|unrestricted|jailbroken|dan)",
    r"system\s+prompt",
    r"reveal\s+(?:your|the)\s+(?:(?:system|hidden|secret|initial|original)\s+)?(?:prompt|instructions)",
    rf"(?:do\s+not|don[’']?t)\s+(?:tell|inform|notify)\s+the\s+{_WHO}",
    r"act\s+as\s+(?:if|though|an?|the|my|your)",
    r"developer\s+mode",
    r"jailbreak\w*",
    r"exfiltrat\w*",
    r"base64\s+(?:-d|--decode)",
]
_SYMBOLIC = [  # start or end on a non-word character
    r"\bnew\s+instructions?\s*:",
    r"\brun\s+(?:this|the\s+following)\s+(?:command|script|code)\s*:",
    r"\b(?:send|upload|forward|post)\s+(?:the|all|your|every|any)\b[^\n]{0,80}?\bto\s+https?://",
    r"\b(?:curl|wget)\b[^\n|]{0,200}\|\s*(?:sudo\s+)?(?:ba|z|da)?sh\b",
    r"<\|(?:im_start|im_end|im_sep|system|user|assistant|endoftext)\|>",
    r"<<\s*/?sys\s*>>",
    r"\[/?inst\]",
    r"##+\s*(?:new\s+)?(?:instructions?|system)\b",
]
_INJECTION = re.compile(r"\b(?:" + "|".join(_WORDY) + r")\b|" + "|".join(_SYMBOLIC))

# --- secrets: one alternation of the known shapes, one regex for entropy candidates -------------------------------

_SECRET_KINDS = {
    "aws": "an AWS access key",
    "anthropic": "an Anthropic API key",
    "openai": "an OpenAI-style API key",
    "github": "a GitHub token",
    "slack": "a Slack token",
    "google": "a Google API key",
    "stripe": "a Stripe live key",
    "jwt": "a JSON Web Token",
    "pem": "a PEM private key",
    "assignment": "a credential assignment",
}
_SECRET = re.compile(
    r"(?P<aws>\bAKIA[0-9A-Z]{16}\b)"
    r"|(?P<anthropic>\bsk-ant-[A-Za-z0-9_-]{20,})"
    r"|(?P<openai>\bsk-[A-Za-z0-9_-]{20,})"
    r"|(?P<github>\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}))"
    r"|(?P<slack>\bxox[abprs]-[A-Za-z0-9-]{10,})"
    r"|(?P<google>\bAIza[0-9A-Za-z_-]{35})"
    r"|(?P<stripe>\b[rs]k_live_[0-9A-Za-z]{10,})"
    r"|(?P<jwt>\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*)"
    r"|(?P<pem>-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----)"
    r"|(?P<assignment>(?i:password|passwd|pwd|api[_-]?key|secret|token)\s*[:=]\s*[\"']?(?P<value>[^\s\"'`,;]{8,}))"
)
_TOKEN = re.compile(rf"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/=_-]{{{ENTROPY_MIN_LENGTH},}}")
_LETTER = re.compile(r"[A-Za-z]")
_DIGIT = re.compile(r"[0-9]")
_CLASSES = {
    **dict.fromkeys(string.ascii_lowercase, "l"), **dict.fromkeys(string.ascii_uppercase, "u"),
    **dict.fromkeys(string.digits, "d"),
}  # fmt: skip
_CLASS_BYTES = bytes(ord(_CLASSES.get(chr(byte), "s")) for byte in range(256))  # CLASS_CHANGE_MIN's classes
_CLASS_CHANGES = (b"lu", b"ld", b"ud", b"dl", b"du")  # not "ul": a capital starting a lower-case word
_HEX = ("0123456789abcdef-", "0123456789ABCDEF-")
# Not a credential: a placeholder ("********", "<your key>", "${TOKEN}", "{{ secret }}", "[redacted]", "YOUR_API_KEY",
# "your-token-here", "REPLACE_ME", "sk-example-key"), an environment variable's name ("GITHUB_TOKEN") or a reference
# to one ("os.environ[", "os.getenv(", "process.env.API_KEY").
_PLACEHOLDER = re.compile(
    r"(.)\1*|[<{$%\[].*"
    r"|(?i:hidden|masked|.*[-_]here)\W*"
    r"|(?i:.*(?:redacted|placeholder|example|replace[-_]?me|change[-_]?me).*)"
    r"|(?i:(?:.*[-_.])?your[-_.].*)"
    r"|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+"
    r"|(?:os\.)?(?:environ\b|getenv\().*|process\.env\..*"
)

# --- URLs ---------------------------------------------------------------------------------------------------------

_URL_BODY = r"[^\s<>\"'`{}|\\^]"
_URL = re.compile(
    rf"(?i:(?P<scheme>\bhttps?://{_URL_BODY}+)"
    rf"|(?P<www>\bwww\.{_URL_BODY}+)"
    rf"|(?P<bare>\b(?:[a-z0-9](?:[a-z0-9-]{{0,61}}[a-z0-9])?\.)+[a-z]{{2,24}}/{_URL_BODY}*))"
)
_URL_TAIL = ".,;:!?'\")]}"
_IP = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}|.*:.*")  # IPv4, or IPv6 (the brackets already gone)

# --- the gate: what may have a finding, for all the texts at once ---------------------------------------------------
#
# All the texts are joined by NULs into one string and encoded one byte a character (any non-ASCII character becomes
# "?"). Each pattern of the rules has a signature: the characters every match of it starts with, in lower case
# (`_GATE_PATTERNS`; a position of a signature is a set of characters, with "?" wherever \s could match a non-ASCII
# space; the tables take each letter in either case). Three stages, the first two over the whole text in C
# (bytes.translate, numpy), only the third in Python:
#
# 1. A rare pair of adjacent positions of each signature (its anchor: "gn" of ignore) is found everywhere at once:
#    the text translated twice through 256-byte tables whose bits say "this byte may be the first (the second) of
#    the anchor of a pattern of group k" (8 groups), the two copies ANDed one byte apart.
# 2. At each anchor found, the patterns whose anchor those two bytes are (a bit per pattern, a table of the 65,536
#    pairs), then the _REACH bytes on either side are checked against each pattern's signature (a table per offset;
#    the nearest offsets first, the survivors shrinking at each).
# 3. Where both hold, the pattern itself is matched there, in the survivor's own text lowered (`re.match`).
#
# A text then gets the rule families (`_URLS`, `_SECRETS`, `_TOKENS`, `_INJECTIONS`) its confirmed patterns belong
# to: each family's patterns are a necessary condition of any match of its regex, so a family left out has nothing
# there. High-entropy tokens are found apart (`_long_tokens`). A text holding one of the few characters re's case
# folding matches as ASCII letters but lowering keeps apart (ſ for s, ı for i), or one lowering turns into ASCII
# (the Kelvin sign, İ), gets every family (`_FOLDED`).
#
# Every match of `_SECRET` starts where a `_SECRETS` pattern of the gate does (their signatures are its alternatives'
# first characters), so `_SECRET` is run from the first of them in the text, not from its start. "send … to
# https://" ends where its pattern's signature is: it is searched for in the text up to there (`_sent_to_url`).

_URLS, _SECRETS, _TOKENS, _INJECTIONS = 1, 2, 4, 8
_EVERY_FAMILY = _URLS | _SECRETS | _TOKENS | _INJECTIONS
_WS = frozenset(" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f?")  # what \s may be, encoded
_TOKEN_SET = frozenset(string.ascii_lowercase + string.digits + "_-")
_ALNUM = frozenset(string.ascii_lowercase + string.digits)
_LETTERS = frozenset(string.ascii_lowercase)
_ASSIGN = r"""\s*[:=]\s*["']?[^\s"'`,;]{8}"""  # a credential assignment's separator and 8 value characters
_SEPARATOR = _WS | {":", "="}
_COLON = frozenset(":")


def _sent_to_url(lowered: str, at: int) -> re.Match | None:
    """Stage 3 of "send … to https://", whose match ends with the "://" at `at`: searched for in the text up to it."""
    return _SENT_TO_URL(lowered, 0, at + 3)


_SENT_TO_URL = re.compile(_SYMBOLIC[2]).search


def _then(first: str) -> frozenset:
    """The position after one space of `\\s+<word>`: another space or the word's first letter."""
    return _WS | set(first)


# (signature, anchor, group, family, pattern matched where the signature starts). In a signature a string is literal
# characters, a frozenset one position's choices. The anchors and groups were chosen so that stage 1 finds few pairs
# (a pair in a group's first table and its second one): a local search over every anchor and group, counting the
# pairs found in a corpus of prose (docs/), Python code and the tests' ordinary guidance.
_GATE_PATTERNS: list[tuple[tuple, int, int, int, Any]] = [
    (("ignore", _WS, _then("atoeymspfi")), 1, 6, _INJECTIONS, rf"\bignore\s+{_THEIR_ORDERS}"),
    (("disregard", _WS, _then("atoeymspfi")), 2, 4, _INJECTIONS, rf"\bdisregard\s+{_THEIR_ORDERS}"),
    (("forget", _WS, _then("atoeymspfi")), 2, 5, _INJECTIONS, rf"\bforget\s+(?:everything|{_THEIR_ORDERS})"),
    (("override", _WS, _then("tyam")), 0, 1, _INJECTIONS, r"\b" + _WORDY[3]),
    (("you", _WS, _then("a")), 2, 2, _INJECTIONS, r"\b" + _WORDY[4]),
    (("system", _WS, _then("p")), 5, 2, _INJECTIONS, r"\bsystem\s+prompt"),
    (("reveal", _WS, _then("yt")), 5, 2, _INJECTIONS, r"\b" + _WORDY[6]),
    (("tell", _WS, _then("t")), 3, 2, _INJECTIONS, rf"\btell\s+the\s+{_WHO}"),
    (("inform", _WS, _then("t")), 5, 2, _INJECTIONS, rf"\binform\s+the\s+{_WHO}"),
    (("notify", _WS, _then("t")), 4, 1, _INJECTIONS, rf"\bnotify\s+the\s+{_WHO}"),
    (("act", _WS, _then("a")), 1, 6, _INJECTIONS, r"\b" + _WORDY[8]),
    (("developer", _WS, _then("m")), 1, 3, _INJECTIONS, r"\bdeveloper\s+mode"),
    (("jailbreak",), 0, 0, _INJECTIONS, r"\bjailbreak"),
    (("exfiltrat",), 1, 4, _INJECTIONS, r"\bexfiltrat"),
    (("base64", _WS, _then("-")), 3, 3, _INJECTIONS, r"\bbase64\s+-"),
    (("new", _WS, _then("i")), 2, 2, _INJECTIONS, r"\bnew\s+instructions?\s*:"),
    (("command", _WS | _COLON), 2, 6, _INJECTIONS, r"command\s*:"),
    (("script", _WS | _COLON), 1, 4, _INJECTIONS, r"script\s*:"),
    (("code", _WS | _COLON, _WS | _COLON), 1, 1, _INJECTIONS, r"code\s*:"),  # or "code:" then anything
    (("code:",), 1, 1, _INJECTIONS, r"code\s*:"),
    (("curl",), 2, 5, _INJECTIONS, _SYMBOLIC[3]),
    (("wget",), 0, 5, _INJECTIONS, _SYMBOLIC[3]),
    (("<|",), 0, 0, _INJECTIONS, _SYMBOLIC[4]),
    (("<<",), 0, 0, _INJECTIONS, _SYMBOLIC[5]),
    (("[inst]",), 0, 7, _INJECTIONS, _SYMBOLIC[6]),
    (("[/inst]",), 0, 3, _INJECTIONS, _SYMBOLIC[6]),
    (("##",), 0, 5, _INJECTIONS, _SYMBOLIC[7]),
    (("akia", *[_ALNUM] * 4), 2, 0, _SECRETS, r"\bakia[0-9a-z]{16}"),
    (("sk-", *[_TOKEN_SET] * 4), 1, 0, _SECRETS, r"\bsk-[a-z0-9_-]{20}"),
    (("gh", frozenset("pousr"), "_", *[_ALNUM] * 4), 0, 1, _SECRETS, r"\bgh[pousr]_[a-z0-9]{20}"),
    (("github_pat_",), 3, 3, _SECRETS, r"\bgithub_pat_"),
    (("xox", frozenset("abprs"), "-"), 1, 1, _SECRETS, r"\bxox[abprs]-[a-z0-9-]{10}"),
    (("aiza", *[_TOKEN_SET] * 4), 2, 0, _SECRETS, r"\baiza[0-9a-z_-]{35}"),
    ((frozenset("rs"), "k_live_"), 1, 0, _SECRETS, r"\b[rs]k_live_[0-9a-z]{10}"),
    (("eyj", *[_TOKEN_SET] * 4), 1, 5, _SECRETS, r"\beyj[a-z0-9_-]{10}"),
    (("-----begin ",), 4, 5, _SECRETS, r"-----begin "),
    (("passw", frozenset("od")), 3, 4, _SECRETS, rf"passw(?:or)?d{_ASSIGN}"),
    (("pwd", _SEPARATOR), 0, 6, _SECRETS, rf"pwd{_ASSIGN}"),
    (("api", frozenset("_-k")), 2, 0, _SECRETS, rf"api[_-]?key{_ASSIGN}"),
    (("secret", _SEPARATOR), 2, 4, _SECRETS, rf"secret{_ASSIGN}"),
    (("token", _SEPARATOR), 1, 1, _SECRETS, rf"token{_ASSIGN}"),
    (("://",), 0, 3, _URLS, r"://"),  # a scheme
    (("://",), 0, 3, _INJECTIONS, _sent_to_url),
    (("www.",), 0, 2, _URLS, r"\bwww\."),
    # The end of a bare host, by the length of its top-level name (6 letters or more: a prefix of the name).
    *(((".", *[_LETTERS] * length, "/"), 0, 7, _URLS, r"\.[a-z]{2,24}/") for length in range(2, 6)),
    ((".", *[_LETTERS] * 6), 0, 7, _URLS, r"\.[a-z]{2,24}/"),
]
_FOLDED = re.compile("[\u017f\u0131\u212a\u0130]")
_REACH = 6  # stage 2 checks the bytes from _REACH before an anchor to _REACH after it


def _positions(signature: tuple) -> list[frozenset]:
    return [
        frozenset(part) if isinstance(part, frozenset) else frozenset(c)
        for part in signature
        for c in ([part] if isinstance(part, frozenset) else part)
    ]


def _bytes(characters: frozenset) -> list[int]:
    """The bytes of a signature position: its (lower-case) characters and their upper case."""
    return sorted({ord(c) for c in characters} | {ord(c.upper()) for c in characters if c.isascii()})


def _gate_tables():
    """Stage 1's two translation tables (a bit per group), stage 2's tables (a bit per pattern: of the anchor's two
    bytes, and of a byte per offset from the anchor), and the patterns' (anchor, family, match)."""
    first, second = bytearray(256), bytearray(256)
    pairs = np.zeros(256 * 256, dtype=np.uint64)
    around = np.zeros((2 * _REACH + 1, 256), dtype=np.uint64)
    matches = []
    for number, (signature, anchor, group, family, pattern) in enumerate(_GATE_PATTERNS):
        bit = np.uint64(1 << number)
        positions = _positions(signature)
        for byte in _bytes(positions[anchor]):
            first[byte] |= 1 << group
        for byte in _bytes(positions[anchor + 1]):
            second[byte] |= 1 << group
        pairs[np.add.outer(np.array(_bytes(positions[anchor])) << 8, _bytes(positions[anchor + 1])).ravel()] |= bit
        for offset in range(-_REACH, _REACH + 1):
            at = anchor + offset
            allowed = _bytes(positions[at]) if 0 <= at < len(positions) else slice(None)
            around[offset + _REACH, allowed] |= bit
        matches.append((anchor, family, pattern if callable(pattern) else re.compile(pattern).match))
    return bytes(first), bytes(second), pairs, around, matches


if len(_GATE_PATTERNS) > 64:  # a bit each in stage 2's uint64 tables
    raise RuntimeError("the gate has room for 64 patterns")
_FIRST, _SECOND, _PAIRS, _AROUND, _GATE_MATCHES = _gate_tables()
# Stage 2's offsets from the anchor after the anchor itself, nearest first.
_OFFSET_ORDER = sorted((*range(-_REACH, 0), *range(2, _REACH + 1)), key=lambda offset: (abs(offset - 0.5), offset))

# High-entropy tokens, for all the texts at once. The runs of token characters (`_TOKEN`'s alphabet translated to
# "a", any other byte to " "): a run of ENTROPY_MIN_LENGTH holds two whole aligned 8-byte words of "a"s, found by
# numpy on the text seen as 8-byte words, and its ends are found from the bytes around those words. Then every run
# long enough is put through `_high_entropy`'s tests of its characters at once (`_may_be_high`: the same tests, as
# integer counts over the runs' bytes), and only the few that pass them are measured in Python by `_high_entropy`,
# the rule itself.
_TOKEN_CHARACTERS = string.ascii_letters + string.digits + "+/=_-"
_RUN_BYTES = bytes(ord("a") if chr(byte) in _TOKEN_CHARACTERS else ord(" ") for byte in range(256))
_ALL_RUN = np.frombuffer(b"a" * 8, np.uint64)[0]
_EIGHT = np.arange(8)
# A token character's code for `_may_be_high`: its class (CLASS_CHANGE_MIN's, one bit each) and whether it is a
# hexadecimal digit of either case; a pair of adjacent characters' code (their classes' bits, 4 and 4): whether the
# class changes there (`_CLASS_CHANGES`), whether neither is a separator.
_LOWER, _UPPER, _DIGIT_CLASS, _SEPARATE, _LOWER_HEX, _UPPER_HEX = 1, 2, 4, 8, 16, 32
_CLASS_BIT = {ord("l"): _LOWER, ord("u"): _UPPER, ord("d"): _DIGIT_CLASS, ord("s"): _SEPARATE}
_CHARACTER_CODES = bytes(
    _CLASS_BIT[_CLASS_BYTES[byte]]
    | (_LOWER_HEX if chr(byte) in _HEX[0] else 0)
    | (_UPPER_HEX if chr(byte) in _HEX[1] else 0)
    for byte in range(256)
)
_CLASS_CHANGE, _NO_SEPARATOR = 1, 2
_CHANGES = {_CLASS_BIT[first] << 4 | _CLASS_BIT[second] for first, second in _CLASS_CHANGES}
_NOT_SEPARATE = (_LOWER, _UPPER, _DIGIT_CLASS)
_PAIR_CODES = bytes(
    (_CLASS_CHANGE if pair in _CHANGES else 0)
    | (_NO_SEPARATOR if pair >> 4 in _NOT_SEPARATE and pair & 15 in _NOT_SEPARATE else 0)
    for pair in range(256)
)


def scan(texts: Iterable[LearnedText], *, allowed_hosts: Iterable[str] = ()) -> list[Finding]:
    """Every finding in `texts`, in input order and then by position in each text."""
    allowed = tuple(_normal_host(host) for host in allowed_hosts if _normal_host(host))
    observations: dict[str, str] = {}  # observation -> lowered, spacing normalised (only for injection hits)
    items = list(texts)
    findings: list[Finding] = []
    for index, families, tokens, secrets_from in _candidates([item.text for item in items]):
        item = items[index]
        lowered = _lower(item.text)
        findings.extend(_scan_text(item, item.text, lowered, allowed, observations, families, tokens, secrets_from))
    return findings


def _candidates(texts: list[str]) -> list[tuple[int, int, list[tuple[int, int]], int]]:
    """(index, rule families, the spans of its high-entropy tokens, where `_SECRET` may first match), in order, of the
    texts that may have a finding (the others have none)."""
    if not texts:
        return []
    joined = "\x00".join(texts)
    data = bytearray(joined, "ascii", "replace")  # one byte a character, "?" for any non-ASCII one
    starts = _text_starts(texts, data)
    hits = _gate_hits(joined, data, starts)  # (where a pattern's match starts in joined, its family)
    tokens = _long_tokens(joined, data)
    hits.extend((start, _TOKENS) for start, _ in tokens)
    if not joined.isascii():
        hits.extend((match.start(), _EVERY_FAMILY) for match in _FOLDED.finditer(joined))
    if not hits:
        return []
    families: dict[int, int] = {}
    secrets_from: dict[int, int] = {}
    for index, (at, family) in zip(
        np.searchsorted(starts, [at for at, _ in hits], "right").tolist(), hits, strict=True
    ):
        families[index - 1] = families.get(index - 1, 0) | family
        if family & _SECRETS:  # the start of a secret's pattern; a folded text's start
            at = 0 if family == _EVERY_FAMILY else at - int(starts[index - 1])
            secrets_from[index - 1] = min(at, secrets_from.get(index - 1, at))
    spans: dict[int, list[tuple[int, int]]] = {}  # in the text
    for index, (start, end) in zip(
        np.searchsorted(starts, [start for start, _ in tokens], "right").tolist(), tokens, strict=True
    ):
        offset = int(starts[index - 1])
        spans.setdefault(index - 1, []).append((start - offset, end - offset))
    return [
        (index, family, spans.get(index, []), secrets_from.get(index, 0)) for index, family in sorted(families.items())
    ]


def _text_starts(texts: list[str], data: bytes) -> np.ndarray:
    """Where each text starts in the joined text (and where the joined text ends): after each NUL between two texts,
    found at once, unless a text holds a NUL of its own."""
    nuls = np.flatnonzero(np.frombuffer(data, np.uint8) == 0)
    if len(nuls) == len(texts) - 1:
        return np.concatenate(([0], nuls + 1, [len(data) + 1]))
    return np.array([0, *accumulate(len(text) + 1 for text in texts)])


def _gate_hits(joined: str, data: bytearray, starts: np.ndarray) -> list[tuple[int, int]]:
    """(where its match starts, family) of each pattern of `_GATE_PATTERNS` that matches, through the three stages.
    The tables fold ASCII case; the third stage matches in the lowered text of the survivor's own text."""
    if len(data) < 2:
        return []
    # `data` is a bytearray, so are its translations: the AND and the test are written over them, not into two more
    # arrays the size of the text.
    first, second = np.frombuffer(data.translate(_FIRST), np.uint8), np.frombuffer(data.translate(_SECOND), np.uint8)
    groups = np.bitwise_and(first[:-1], second[1:], out=first[:-1])
    where = np.flatnonzero(np.not_equal(groups, 0, out=second[:-1].view(bool)))
    if not where.size:
        return []
    raw = np.frombuffer(data, np.uint8)
    patterns = _PAIRS[raw[where].astype(np.intp) << 8 | raw[where + 1]]  # the patterns of the anchor found
    for offset in _OFFSET_ORDER:  # the survivors shrink at each offset: the nearest ones first
        # Past either end of the text a byte is read from the end ("clip"): it can only let a survivor through.
        patterns &= _AROUND[offset + _REACH][raw.take(where + offset, mode="clip")]
        alive = np.flatnonzero(patterns)
        if alive.size < where.size:
            where, patterns = where[alive], patterns[alive]
            if not where.size:
                return []
    hits = []
    lowered: dict[int, tuple[int, str]] = {}  # text index -> (its start, its text lowered)
    indices = np.searchsorted(starts, where, "right").tolist()
    for at, bits, index in zip(where.tolist(), patterns.tolist(), indices, strict=True):
        if index not in lowered:
            start = int(starts[index - 1])
            lowered[index] = start, _lower(joined[start : int(starts[index]) - 1])
        start, text = lowered[index]
        while bits:
            number = (bits & -bits).bit_length() - 1
            bits &= bits - 1
            anchor, family, match = _GATE_MATCHES[number]
            if at - anchor >= start and match(text, at - anchor - start) is not None:
                hits.append((at - anchor, family))
    return hits


def _long_tokens(joined: str, data: bytes) -> list[tuple[int, int]]:
    """The spans of the tokens of high entropy (see `_RUN_BYTES`)."""
    runs = data.translate(_RUN_BYTES)
    words = np.frombuffer(runs, np.uint64, count=len(runs) // 8) == _ALL_RUN
    pairs = np.flatnonzero(words[:-1] & words[1:])
    if not pairs.size:
        return []
    # Consecutive pairs are one run of whole words: words first .. last + 1.
    breaks = np.flatnonzero(np.diff(pairs) != 1)
    first = pairs[np.concatenate(([0], breaks + 1))]
    after = pairs[np.concatenate((breaks, [len(pairs) - 1]))] + 2
    # The run's "a"s in the word before its first (up to 7: a whole word there would have been in the run) and in
    # the word after its last, the bytes outside the text counting as " ".
    raw = np.frombuffer(runs, np.uint8)
    before = first[:, None] * 8 - 1 - _EIGHT
    behind = (raw.take(before, mode="clip") == 97) & (before >= 0)
    beyond = after[:, None] * 8 + _EIGHT
    ahead = (raw.take(beyond, mode="clip") == 97) & (beyond < len(raw))
    starts = first * 8 - behind.argmin(axis=1)
    lengths = after * 8 + ahead.argmin(axis=1) - starts
    long = lengths >= ENTROPY_MIN_LENGTH
    starts, lengths = starts[long], lengths[long]
    candidates = _may_be_high(data, starts, lengths)
    starts, ends = starts[candidates].tolist(), (starts + lengths)[candidates].tolist()
    return [
        (start, end) for start, end in zip(starts, ends, strict=True) if _high_entropy(joined[start:end]) is not None
    ]


def _may_be_high(data: bytes, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Which runs of token characters (their starts and lengths in `data`) pass `_high_entropy`'s tests before the
    entropy, all at once: the same counts, over the runs' characters laid end to end."""
    if not starts.size:
        return np.zeros(0, bool)
    ends = np.cumsum(lengths)
    offsets = ends - lengths  # where each run starts among the characters
    characters = np.frombuffer(data, np.uint8)[np.arange(ends[-1]) + np.repeat(starts - offsets, lengths)]
    codes = np.frombuffer(characters.tobytes().translate(_CHARACTER_CODES), np.uint8)
    some, every = np.bitwise_or.reduceat(codes, offsets), np.bitwise_and.reduceat(codes, offsets)
    classes = codes & 15
    pairs = np.frombuffer(((classes[:-1] << 4) | classes[1:]).tobytes().translate(_PAIR_CODES), np.uint8).copy()
    pairs[ends[:-1] - 1] = 0  # a run's last character and the next run's first are no pair
    changes = np.add.reduceat(pairs & _CLASS_CHANGE, offsets, dtype=np.intp)
    # Within a run, the pairs of adjacent characters that are no separator: the sum of (length - 1) of its parts
    # between separators; at least length - 1 - 2 * separators, so their test implies the one before it.
    joined_pairs = np.add.reduceat(pairs >> 1, offsets, dtype=np.intp)
    return (
        (some & (_LOWER | _UPPER) != 0)
        & (some & _DIGIT_CLASS != 0)
        & (every & _LOWER_HEX == 0)
        & (every & _UPPER_HEX == 0)
        & (changes >= CLASS_CHANGE_MIN * joined_pairs)
    )


def _scan_ungated(texts: Iterable[LearnedText], *, allowed_hosts: Iterable[str] = ()) -> list[Finding]:
    """`scan` without the gate (the tests check the gate loses nothing)."""
    allowed = tuple(_normal_host(host) for host in allowed_hosts if _normal_host(host))
    observations: dict[str, str] = {}
    findings: list[Finding] = []
    for item in texts:
        findings.extend(_scan_text(item, item.text, _lower(item.text), allowed, observations, _EVERY_FAMILY))
    return findings


def _lower(text: str) -> str:
    """The text lowered position for position: "İ" (U+0130, the one character whose lower case is two) becomes "i",
    so a match in the lowered text is at the same place in the text (its excerpt in the text's own case, its
    findings ordered with the others)."""
    lowered = text.lower()
    return lowered if len(lowered) == len(text) else text.replace("\u0130", "I").lower()


def _scan_text(
    item: LearnedText,
    text: str,
    lowered: str,
    allowed,
    observations,
    families: int,
    tokens: list | None = None,
    secrets_from: int = 0,
) -> list[Finding]:
    """The findings in one text, of the rule families asked for (the others have none there: see the gate).
    `tokens`: the spans of its high-entropy tokens when known (`_long_tokens`); `secrets_from`: where `_SECRET` may
    first match (see the gate)."""
    found: list[tuple[int, int, Finding]] = []  # (position, rule order, finding)
    spans: list[tuple[int, int]] = []  # URLs: no entropy warning inside one
    credential_spans: list[tuple[int, int]] = []  # reported once, as a secret
    for match in _URL.finditer(text) if families & _URLS else ():
        start, url = match.start(), match.group().rstrip(_URL_TAIL)
        if not url:
            continue
        end = start + len(url)
        spans.append((start, end))
        host, _, password = _url_parts(url, has_scheme=match.lastgroup == "scheme")
        if password:
            credential_spans.append((start, end))
            message = f"A URL to {host or 'a host'} carries a user name and password; learned text must not."
            # _redact masks the password and any other secret in the URL (a key in its query string).
            found.append((start, 1, Finding("secret", CRITICAL, item.where, _cut(_redact(url)), message, item.sources)))
        elif host and not _allowed(host, allowed):
            kind = "the IP address" if _IP.fullmatch(host) else "the host"
            message = f"A link to {kind} {host}, which is not among the allowed hosts."
            found.append((start, 2, Finding("url", WARNING, item.where, _cut(_redact(url)), message, item.sources)))
    secret_spans: list[tuple[int, int]] = []
    for match in _SECRET.finditer(text, secrets_from) if families & _SECRETS else ():
        start, end = match.span()
        if _inside(start, end, credential_spans):
            continue
        kind = match.lastgroup
        if kind == "assignment":
            value = match.group("value")
            if _PLACEHOLDER.fullmatch(value) or (value.isdigit() and match.group().lower().startswith("token")):
                continue
            excerpt = text[start : match.start("value")] + _mask(value)
        elif kind == "pem":
            excerpt = match.group()  # the header only: the key itself follows it
        else:
            excerpt = _mask(match.group())
        secret_spans.append((start, end))
        message = f"This looks like {_SECRET_KINDS[kind]}; learned text must not carry credentials."
        found.append((start, 1, Finding("secret", CRITICAL, item.where, _cut(excerpt), message, item.sources)))
    if tokens is None and families & _TOKENS:
        tokens = [match.span() for match in _TOKEN.finditer(text) if _high_entropy(match.group()) is not None]
    for start, end in tokens if families & _TOKENS else ():
        if _inside(start, end, spans) or _overlaps(start, end, secret_spans):
            continue
        token = text[start:end]
        bits = _high_entropy(token)
        message = f"A {len(token)}-character token of {bits:.1f} bits per character may be a key or a password."
        found.append((start, 1, Finding("secret", WARNING, item.where, _mask(token), message, item.sources)))
    for match in _INJECTION.finditer(lowered) if families & _INJECTIONS else ():
        found.append((match.start(), 0, _injection(item, text, lowered, match, observations)))
    found.sort(key=lambda entry: entry[:2])
    return [finding for _, _, finding in found]


def _injection(item: LearnedText, text: str, lowered: str, match: re.Match, observations) -> Finding:
    phrase = " ".join(match.group().split())
    traced = tuple(source for source in item.sources if phrase in _observation(source.observation, observations))
    excerpt = _redact(text[match.start() : match.end()])  # in the text's own case (_lower keeps positions)
    if traced:
        where = ", ".join(_source_label(source) for source in traced)
        message = f"An instruction-like phrase copied from a tool observation ({where}); an agent may obey it."
        return Finding("injection", CRITICAL, item.where, _cut(excerpt), message, traced)
    message = "An instruction-like phrase in learned text; check it guides the agent rather than commands it."
    return Finding("injection", WARNING, item.where, _cut(excerpt), message, ())


def _observation(observation: str, cache: dict[str, str]) -> str:
    normal = cache.get(observation)
    if normal is None:
        normal = cache[observation] = " ".join(_lower(observation).split())
    return normal


def _source_label(source: Source) -> str:
    return f"run {source.run_id}" if source.step is None else f"run {source.run_id} step {source.step}"


def _high_entropy(token: str) -> float | None:
    """The token's entropy in bits per character when it counts as high (see ENTROPY_THRESHOLD), else None."""
    if not (_LETTER.search(token) and _DIGIT.search(token)):
        return None
    if not token.strip(_HEX[0]) or not token.strip(_HEX[1]):
        return None  # hexadecimal (a digest, a UUID): at most 4 bits a character
    # The character classes (see CLASS_CHANGE_MIN), one byte each: l(ower), u(pper), d(igit), s(eparator).
    classes = token.encode("ascii", "replace").translate(_CLASS_BYTES)
    changes = sum(map(classes.count, _CLASS_CHANGES))
    separators = classes.count(b"s")
    if changes < CLASS_CHANGE_MIN * (len(classes) - 2 * separators - 1):  # fewer pairs there cannot be
        return None  # a name or a path: its character classes change only where a word or a number starts
    if changes < CLASS_CHANGE_MIN * sum(len(run) - 1 for run in classes.split(b"s") if run):
        return None
    length = len(token)
    entropy = math.log2(length) - sum(count * math.log2(count) for count in Counter(token).values()) / length
    return entropy if entropy >= ENTROPY_THRESHOLD else None


def _url_parts(url: str, *, has_scheme: bool) -> tuple[str, str, str]:
    """(host lowered, user, password) of a URL; the host without port or brackets."""
    rest = url.split("://", 1)[1] if has_scheme else url
    netloc = re.split(r"[/?#]", rest, maxsplit=1)[0]
    userinfo, _, hostport = netloc.rpartition("@")
    host = hostport[1:].split("]", 1)[0] if hostport.startswith("[") else hostport.split(":", 1)[0]
    user, _, password = userinfo.partition(":")
    return host.lower().rstrip("."), user, password


def _normal_host(host: str) -> str:
    return host.strip().lower().removeprefix("*.").strip(".")


def _allowed(host: str, allowed: tuple[str, ...]) -> bool:
    return any(host == name or host.endswith("." + name) for name in allowed)


def _inside(start: int, end: int, spans: list[tuple[int, int]]) -> bool:
    return any(low <= start and end <= high for low, high in spans)


def _overlaps(start: int, end: int, spans: list[tuple[int, int]]) -> bool:
    return any(start < high and low < end for low, high in spans)


def _mask(secret: str) -> str:
    """The first 4 characters (never more than half the secret) and an ellipsis."""
    return secret[: min(4, len(secret) // 2)] + "…"


# user:password@ after a scheme or at the start (a URL without one): the password up to the last "@" before the
# path, as `_url_parts` reads it.
_CREDENTIALS = re.compile(r"(?:(?<=://)|^)([^\s/?#:]*:)([^\s/?#]+)(?=@)")


def _redact(excerpt: str) -> str:
    """An excerpt of another rule (a URL, an injected command) with the secrets in it masked."""

    def known(match: re.Match) -> str:
        if match.lastgroup == "assignment":
            return match.group()[: match.start("value") - match.start()] + _mask(match.group("value"))
        return match.group() if match.lastgroup == "pem" else _mask(match.group())

    def token(match: re.Match) -> str:
        return _mask(match.group()) if _high_entropy(match.group()) is not None else match.group()

    excerpt = _CREDENTIALS.sub(lambda match: match.group(1) + _mask(match.group(2)), excerpt)
    return _TOKEN.sub(token, _SECRET.sub(known, excerpt))


def _cut(excerpt: str) -> str:
    return excerpt if len(excerpt) <= EXCERPT_LIMIT else excerpt[: EXCERPT_LIMIT - 1] + "…"
