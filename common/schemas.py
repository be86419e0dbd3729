"""The base of every API input schema: a django-ninja Schema that refuses fields it does not declare (422 naming the
field), so a misspelt option is an error instead of a silent default."""

from ninja import Schema
from pydantic import ConfigDict


class InputSchema(Schema):
    model_config = ConfigDict(extra="forbid")
