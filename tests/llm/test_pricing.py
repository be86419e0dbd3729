from decimal import Decimal

from llm.core import Usage
from llm.pricing import cost_of, price_for


def test_it_prices_input_cached_input_and_output_per_million_tokens():
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000, cached_input_tokens=2_000_000)
    # 1M x $3 + 0.1M x $15 + 2M x $0.30
    assert cost_of("claude-sonnet-4-6", usage) == Decimal("5.100000")


def test_it_keeps_six_decimal_places():
    assert cost_of("claude-haiku-4-5", Usage(input_tokens=7, output_tokens=3)) == Decimal("0.000022")


def test_a_dated_model_id_uses_its_alias_price():
    assert price_for("claude-haiku-4-5-20251001") == price_for("claude-haiku-4-5")


def test_an_unknown_model_has_no_cost():
    assert price_for("gpt-4o") is None
    assert cost_of("gpt-4o", Usage(10, 10, 0)) is None


def test_the_scripted_models_cost_nothing():
    assert cost_of("scripted-demo", Usage(10, 10, 0)) == Decimal("0")
