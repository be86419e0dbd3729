"""Every OpenAPI component is one schema class: no two classes behind /api/v1/openapi.json share a component name.

ninja names a component after its class (`StepOut`) and merges each operation's definitions into one dictionary, so
two classes of the same name in different apps collapse into one component — whichever came last — and the other
operations then document a shape they do not answer, silently. Comparing the JSON cannot see it (the loser is gone,
and two identical classes collapse without a trace); so this walks the classes themselves: every schema class an
operation takes or answers, and every class reachable from their fields.
"""

from __future__ import annotations

import enum
import typing
from collections import defaultdict
from collections.abc import Iterable

from ninja import Schema
from ninja.openapi.schema import REF_TEMPLATE, NinjaGenerateJsonSchema
from pydantic import BaseModel, create_model

from config.api import api


def _reachable(roots: Iterable[object]) -> list[type]:
    """The model and enum classes in `roots` (types or annotations) and in their fields, each once."""
    found: list[type] = []
    pending = list(roots)
    while pending:
        annotation = pending.pop()
        if isinstance(annotation, type) and issubclass(annotation, BaseModel | enum.Enum):
            if annotation in found:
                continue
            found.append(annotation)
            if issubclass(annotation, BaseModel):
                pending.extend(field.annotation for field in annotation.model_fields.values())
            continue
        pending.extend(typing.get_args(annotation))  # X | None, list[X], dict[str, X], Annotated[X, …]
    return found


def _operation_classes() -> list[type]:
    """The classes behind every operation: its parameter and body models' fields and its response models' fields
    (ninja wraps both in models of its own, which are not components)."""
    roots: list[object] = []
    for _prefix, router in api._routers:
        for path_view in router.path_operations.values():
            for operation in path_view.operations:
                wrappers = [*operation.models, *operation.response_models.values()]
                for wrapper in wrappers:
                    if isinstance(wrapper, type) and issubclass(wrapper, BaseModel):
                        roots.extend(field.annotation for field in wrapper.model_fields.values())
    return _reachable(roots)


def component_name(cls: type) -> str:
    """The name ninja gives `cls`'s component: generated the way ninja generates it, through a field of that type."""
    probe = create_model("Probe", value=(cls, ...))
    schema = probe.model_json_schema(ref_template=REF_TEMPLATE, schema_generator=NinjaGenerateJsonSchema)
    return schema["properties"]["value"]["$ref"].rsplit("/", 1)[-1]


def shared_names(classes: Iterable[type]) -> dict[str, list[str]]:
    """Component names given to more than one class, with the classes' dotted paths."""
    by_name: dict[str, set[str]] = defaultdict(set)
    for cls in classes:
        by_name[component_name(cls)].add(f"{cls.__module__}.{cls.__qualname__}")
    return {name: sorted(paths) for name, paths in by_name.items() if len(paths) > 1}


def test_no_two_schema_classes_share_a_component_name():
    assert shared_names(_operation_classes()) == {}


def test_the_walk_finds_the_class_of_every_component_in_the_document():
    """Guards the walk above: a component it does not explain would be one it cannot check."""
    named = {component_name(cls) for cls in _operation_classes()}
    documented = set(api.get_openapi_schema()["components"]["schemas"])
    assert documented <= named, sorted(documented - named)


def test_the_check_names_two_classes_of_one_name_even_when_their_json_is_identical():
    first = type("StepOut", (Schema,), {"__annotations__": {"tool": str}, "__module__": "procedures.schemas"})
    second = type("StepOut", (Schema,), {"__annotations__": {"tool": str}, "__module__": "trajectories.schemas"})
    assert shared_names([first, second]) == {"StepOut": ["procedures.schemas.StepOut", "trajectories.schemas.StepOut"]}
    assert shared_names([first, first]) == {}
