"""Prices per million tokens (USD) by model id, and the cost of one call.

A model missing from the table has no cost (None): the ledger shows "unpriced" rather than guess. Dated ids
(`claude-haiku-4-5-20251001`) use the price of their undated alias. Cache writes are priced as plain input.
The figures follow Anthropic's public price list as we last read it; check them there and update this table
when prices change (costs shown in Waymark are estimates from this table, not invoices).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from llm.core import Usage

MILLION = Decimal(1_000_000)
COST_PLACES = Decimal("0.000001")
_DATE_SUFFIX = re.compile(r"-\d{8}$")


@dataclass(frozen=True)
class Price:
    input: Decimal
    output: Decimal
    cached_input: Decimal


def _price(input_: str, output: str, cached_input: str) -> Price:
    return Price(Decimal(input_), Decimal(output), Decimal(cached_input))


PRICES: dict[str, Price] = {
    "claude-opus-5-5": _price("4", "20", "0.20"),
    "claude-opus-5": _price("5", "25", "0.50"),
    "claude-opus-4-8": _price("5", "25", "0.50"),
    "claude-opus-4-7": _price("5", "25", "0.50"),
    "claude-opus-4-6": _price("5", "25", "0.50"),
    "claude-opus-4-5": _price("5", "25", "0.50"),
    "claude-sonnet-5-5": _price("2", "10", "0.10"),
    "claude-sonnet-5": _price("2", "10", "0.20"),
    "claude-sonnet-4-6": _price("3", "15", "0.30"),
    "claude-sonnet-4-5": _price("3", "15", "0.30"),
    "claude-haiku-4-5": _price("1", "5", "0.10"),
    # The scripted models cost nothing.
    "scripted": _price("0", "0", "0"),
    "scripted-demo": _price("0", "0", "0"),
}


def price_for(model_id: str) -> Price | None:
    return PRICES.get(model_id) or PRICES.get(_DATE_SUFFIX.sub("", model_id))


def cost_of(model_id: str, usage: Usage) -> Decimal | None:
    """The cost of a call in USD (6 decimal places), or None when the model has no known price."""
    price = price_for(model_id)
    if price is None:
        return None
    total = (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cached_input_tokens * price.cached_input
    ) / MILLION
    return total.quantize(COST_PLACES)
