"""Plain pydantic twins of django-ninja input schemas, for the per-step calls (config/step_api.py).

A ninja Schema validates through a wrap validator that, for schemas forbidding unknown fields, validates the input
twice (once as given, once through DjangoGetter): about ten times the cost of plain pydantic for a small JSON body.
`plain_model(Schema)` builds a pydantic model with the same fields — the same annotations, constraints, defaults and
config — with every nested ninja Schema replaced by its own twin, so it accepts exactly the JSON objects the schema
accepts and yields the same values. The per-step guidance call validates with the twin and hands anything the twin
refuses to the ninja operation, whose 422 details stay the reference (tests/config/test_step_api.py compares both).
"""

from __future__ import annotations

import copy
import types
import typing
from functools import cache

from ninja import Schema
from pydantic import BaseModel, ConfigDict, create_model


@cache
def plain_model(schema: type[Schema]) -> type[BaseModel]:
    config = ConfigDict(**{key: value for key, value in schema.model_config.items() if key != "from_attributes"})
    fields = {name: (_plain(field.annotation), copy.copy(field)) for name, field in schema.model_fields.items()}
    return create_model(f"Plain{schema.__name__}", __config__=config, **fields)


def _plain(annotation: typing.Any) -> typing.Any:
    """`annotation` with every ninja Schema in it replaced by its plain twin (the same object when none is)."""
    if isinstance(annotation, type) and issubclass(annotation, Schema):
        return plain_model(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is None or not args:
        return annotation
    if origin is typing.Annotated:
        inner = _plain(args[0])
        return annotation if inner is args[0] else typing.Annotated[inner, *annotation.__metadata__]
    plain_args = tuple(_plain(arg) for arg in args)
    if all(new is old for new, old in zip(plain_args, args, strict=True)):
        return annotation
    if origin in (typing.Union, types.UnionType):
        return typing.Union[plain_args]  # noqa: UP007 - rebuilt from its parts
    return origin[plain_args]
