"""A unified diff as (css class, line) pairs, for the diff page and the review item page."""


def line_class(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "diff-file"
    if line.startswith("@@"):
        return "diff-hunk"
    if line.startswith("+"):
        return "diff-add"
    if line.startswith("-"):
        return "diff-del"
    return "diff-same"


def diff_lines(text: str) -> list[tuple[str, str]]:
    return [(line_class(line), line) for line in text.splitlines()]
