"""Recursive freezing and thawing of argument values: read-only mappings and tuples in, plain dicts and lists out."""

from collections.abc import Mapping, Set
from types import MappingProxyType
from typing import Any


def freeze(value: Any) -> Any:
    """Mappings become read-only mappings, lists and tuples become tuples, sets frozensets, all the way down."""
    if isinstance(value, Mapping):
        return MappingProxyType({key: freeze(item) for key, item in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(item) for item in value)
    if isinstance(value, Set):
        return frozenset(freeze(item) for item in value)
    return value


def thaw(value: Any) -> Any:
    """The inverse of `freeze` for storage as JSON: mappings become dicts, sequences lists."""
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(item) for item in value]
    if isinstance(value, Set):
        return [thaw(item) for item in value]
    return value
