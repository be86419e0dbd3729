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
trivial regex over every text). Nearly all learned text is ordinary prose with nothing to report, so each text is
first lowered and searched once by `_GATE`, one regex whose alternatives each start with a literal character,
chosen rare in prose (g, w, p, v, k, x, z, j, digits and a few punctuation marks), so the regex engine skips from
one such character to the next in C. The gate is a necessary condition of every rule: each pattern below contains
one of its anchors (tests/uplift/core/test_safety.py checks that the gated scan equals the ungated one). Only a text
the gate lets through gets the three family regexes (one each: `_INJECTION`, `_SECRET` and `_URL`, each run over
the text once), the entropy measure only for the candidate tokens `_TOKEN` finds, and the comparison with the
sources' observations only for a text the injection regex matched.
"""

from __future__ import annotations

import math
import re
import string
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

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
_CLASS_CHANGE = re.compile(r"[a-z](?=[A-Z0-9])|[A-Z](?=[0-9])|[0-9](?=[A-Za-z])")
_ALNUM_PAIR = re.compile(r"[A-Za-z0-9](?=[A-Za-z0-9])")
_HEX = (frozenset("0123456789abcdef-"), frozenset("0123456789ABCDEF-"))
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

# --- the gate: a necessary condition of every finding, searched once over all the texts ---------------------------

_VALUE = r"""\s*[:=]\s*["']?[^\s"'`,;]{8}"""  # an assignment's separator and the first 8 characters of its value
# Each alternative is one of the patterns above (or a necessary part of one), on the lowered text, started at a
# character rare in prose, the rest of its start checked by a lookbehind: "ignore" is found at its "g".
_GATE = re.compile(
    "|".join(
        [
            rf"g(?:(?<=\big)nore\s+{_THEIR_ORDERS}|(?<=\bdisreg)ard\s+{_THEIR_ORDERS}"
            rf"|(?<=\bforg)et\s+(?:everything|{_THEIR_ORDERS})|(?<=\bg)(?:h[pousr]_[a-z0-9]{{20}}|ithub_pat_))",
            r"v(?:(?<=\bov)erride\s|(?<=\brev)eal\s+(?:your|the)\s|(?<=\bdev)eloper\s+mode)",
            rf"w(?:(?<=\bnow)\s|(?<=\bnew)\s+instructions?\s*:|(?<=\bw)ww\.|(?<=[ps]w)(?:or)?d{_VALUE})",
            r"y(?<=\bsy)stem\s+prompt",
            rf"l(?<=\btel)l\s+the\s+{_WHO}",
            rf"f(?:(?<=\binf)orm|(?<=\bnotif)y)\s+the\s+{_WHO}",
            rf"c(?:(?<=\bac)t\s+as\s|(?<=sec)ret{_VALUE})",
            r"k(?:(?<=\bak)ia[0-9a-z]{16}|(?<=\bsk)-[a-z0-9_-]{20}|(?<=\b[rs]k)_live_[0-9a-z]{10}"
            rf"|(?<=tok)en{_VALUE}|(?<=api[_-]k)ey{_VALUE}|(?<=apik)ey{_VALUE}|(?<=private k)ey-----)",
            r"j(?:(?<=\bj)ailbreak|(?<=\beyj)[a-z0-9_-]{10})",
            r"x(?:(?<=\bex)filtrat|(?<=\bx)ox[abprs]-[a-z0-9-]{10})",
            r"z(?<=\baiz)a[0-9a-z_-]{35}",
            r"6(?<=\bbase6)4\s+-",
            r":(?://|(?<=command:)|(?<=script:)|(?<=code:)|(?<=\s:))",  # a scheme; run this command:
            r"\|\s*(?:sudo\s+)?(?:ba|z|da)?sh\b",  # curl … | sh
            r"<(?:\||<)",  # <|im_start|>, <<SYS>>
            r"\[/?inst\]",
            r"##",
            r"\.[a-z]{2,24}/",  # a bare host with a path
        ]
    )
)
# Characters the case-insensitive patterns (credential names, URLs) match as ASCII letters but lowering keeps
# apart (re's case folding: "ſ" is "s", "ı" is "i"): a text holding one is always scanned whole.
_FOLDED = re.compile("[\u017f\u0131]")
# High-entropy tokens, found without a regex: the texts encoded one byte per character ("?" for any non-ASCII
# one), the token alphabet translated to "a" and everything else to " ", then every run of ENTROPY_MIN_LENGTH "a"s
# is a token `_TOKEN` would find, measured where it is.
_RUN_BYTES = bytes(
    ord("a") if chr(byte) in string.ascii_letters + string.digits + "+/=_-" else ord(" ") for byte in range(256)
)
_LONG_RUN = b"a" * ENTROPY_MIN_LENGTH


def scan(texts: Iterable[LearnedText], *, allowed_hosts: Iterable[str] = ()) -> list[Finding]:
    """Every finding in `texts`, in input order and then by position in each text."""
    allowed = tuple(_normal_host(host) for host in allowed_hosts if _normal_host(host))
    observations: dict[str, str] = {}  # observation -> lowered, spacing normalised (only for injection hits)
    items = list(texts)
    findings: list[Finding] = []
    for index in _candidates([item.text for item in items]):
        item = items[index]
        findings.extend(_scan_text(item, item.text, _lower(item.text), allowed, observations))
    return findings


def _candidates(texts: list[str]) -> list[int]:
    """The indices, in order, of the texts that may have a finding: all the texts joined by NULs into one string,
    lowered once, searched by `_GATE` (from the start of the next text after each hit), `_FOLDED` and the long
    runs of token characters measured in place. The texts with none have nothing to report."""
    if not texts:
        return []
    joined = "\x00".join(texts)
    lowered = _lower(joined)
    starts = [0, *accumulate(len(text) + 1 for text in texts)]  # starts[i]: where text i begins
    marked: set[int] = set()
    search, last = _GATE.search, len(texts) - 1
    match = search(lowered)
    while match is not None:
        index = bisect_right(starts, match.start()) - 1
        marked.add(index)
        if index >= last:
            break
        match = search(lowered, starts[index + 1])
    if not lowered.isascii():
        marked.update(bisect_right(starts, match.start()) - 1 for match in _FOLDED.finditer(lowered))
    runs = joined.encode("ascii", "replace").translate(_RUN_BYTES)
    find = runs.find
    start = find(_LONG_RUN)
    while start >= 0:  # a run's start: the search begins after the previous run (or at 0)
        end = find(b" ", start + ENTROPY_MIN_LENGTH)
        end = len(runs) if end < 0 else end
        if _high_entropy(joined[start:end]) is not None:
            marked.add(bisect_right(starts, start) - 1)
        start = find(_LONG_RUN, end)
    return sorted(marked)


def _scan_ungated(texts: Iterable[LearnedText], *, allowed_hosts: Iterable[str] = ()) -> list[Finding]:
    """`scan` without the gate (the tests check the gate loses nothing)."""
    allowed = tuple(_normal_host(host) for host in allowed_hosts if _normal_host(host))
    observations: dict[str, str] = {}
    findings: list[Finding] = []
    for item in texts:
        findings.extend(_scan_text(item, item.text, _lower(item.text), allowed, observations))
    return findings


def _lower(text: str) -> str:
    """The text lowered position for position: "İ" (U+0130, the one character whose lower case is two) becomes "i",
    so a match in the lowered text is at the same place in the text (its excerpt in the text's own case, its
    findings ordered with the others)."""
    lowered = text.lower()
    return lowered if len(lowered) == len(text) else text.replace("\u0130", "I").lower()


def _scan_text(item: LearnedText, text: str, lowered: str, allowed, observations) -> list[Finding]:
    found: list[tuple[int, int, Finding]] = []  # (position, rule order, finding)
    spans: list[tuple[int, int]] = []  # URLs: no entropy warning inside one
    credential_spans: list[tuple[int, int]] = []  # reported once, as a secret
    for match in _URL.finditer(text):
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
    for match in _SECRET.finditer(text):
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
    for match in _TOKEN.finditer(text):
        token = match.group()
        start, end = match.span()
        if _inside(start, end, spans) or _overlaps(start, end, secret_spans):
            continue
        entropy = _high_entropy(token)
        if entropy is not None:
            message = f"A {len(token)}-character token of {entropy:.1f} bits per character may be a key or a password."
            found.append((start, 1, Finding("secret", WARNING, item.where, _mask(token), message, item.sources)))
    for match in _INJECTION.finditer(lowered):
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
    characters = frozenset(token)
    if characters <= _HEX[0] or characters <= _HEX[1]:
        return None
    length = len(token)
    entropy = math.log2(length) - sum(count * math.log2(count) for count in Counter(token).values()) / length
    if entropy < ENTROPY_THRESHOLD:
        return None
    if len(_CLASS_CHANGE.findall(token)) < CLASS_CHANGE_MIN * len(_ALNUM_PAIR.findall(token)):
        return None  # a name or a path: its character classes change only where a word or a number starts
    return entropy


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
