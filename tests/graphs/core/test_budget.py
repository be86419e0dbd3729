"""Budgets, the meter, the metered model and the hooks (spec §6 Budget, Hooks)."""

from dataclasses import dataclass

import pytest

from graphs.core.budget import Budget, BudgetExceeded, HookedModel, Hooks, Meter, output_tokens_of
from llm.core import ModelRequest, ScriptedChatModel


class FakeClock:
    def __init__(self, now=100.0):
        self.now = now

    def __call__(self):
        return self.now


def request(role="refiner"):
    return ModelRequest(role=role, system="", parts=("hello",), max_tokens=10)


def test_a_default_budget_is_unlimited_and_round_trips():
    assert Budget().unlimited
    budget = Budget(max_model_calls=3, max_output_tokens=100, max_evaluations=2, max_seconds=1.5)
    assert not budget.unlimited
    assert Budget.from_document(budget.to_document()) == budget
    assert Budget.from_document(None) == Budget()


@pytest.mark.parametrize(
    "options",
    [
        {"max_model_calls": -1},
        {"max_model_calls": 1.5},
        {"max_model_calls": True},
        {"max_evaluations": "2"},
        {"max_seconds": float("nan")},
        {"max_seconds": -0.1},
    ],
)
def test_a_budget_refuses_bad_ceilings(options):
    with pytest.raises(ValueError):
        Budget(**options)


def test_from_document_refuses_unknown_keys():
    with pytest.raises(ValueError, match="unknown budget keys"):
        Budget.from_document({"max_calls": 1})


def test_the_meter_refuses_a_model_call_once_the_ceiling_is_reached():
    meter = Meter(Budget(max_model_calls=1))
    meter.check("model:refiner")
    meter.count_model_call(None)
    with pytest.raises(BudgetExceeded) as raised:
        meter.check("model:refiner")
    assert raised.value.ceiling == "max_model_calls"
    assert (raised.value.limit, raised.value.used, raised.value.stage) == (1, 1, "model:refiner")
    assert "max_model_calls" in str(raised.value)


def test_output_tokens_come_from_output_tokens_or_completion_tokens():
    @dataclass
    class OpenAIUsage:
        completion_tokens: int

    @dataclass
    class Response:
        usage: object

    assert output_tokens_of(ScriptedChatModel(["abcdefgh"]).complete(request())) == 2
    assert output_tokens_of(Response(OpenAIUsage(7))) == 7
    assert output_tokens_of(Response({"completion_tokens": 5})) == 5
    assert output_tokens_of(Response(None)) == 0
    meter = Meter(Budget(max_output_tokens=7))
    meter.count_model_call(Response(OpenAIUsage(7)))
    with pytest.raises(BudgetExceeded, match="max_output_tokens"):
        meter.check("iteration")


def test_evaluations_are_checked_only_by_check_evaluation():
    meter = Meter(Budget(max_evaluations=1))
    meter.check_evaluation()
    meter.count_evaluation()
    meter.check("iteration")
    with pytest.raises(BudgetExceeded, match="max_evaluations"):
        meter.check_evaluation("validation:1")


def test_seconds_are_measured_with_the_clock():
    clock = FakeClock()
    meter = Meter(Budget(max_seconds=10), clock=clock)
    clock.now += 9.5
    meter.check("iteration")
    clock.now += 0.5
    with pytest.raises(BudgetExceeded, match="max_seconds"):
        meter.check("iteration")


def test_a_meter_resumes_the_spend_of_an_earlier_invocation():
    clock = FakeClock()
    budget = Budget(max_model_calls=3, max_evaluations=2, max_seconds=10)
    first = Meter(budget, clock=clock)
    first.count_model_call(ScriptedChatModel(["abcd"]).complete(request()))
    first.count_evaluation()
    clock.now += 4
    spent = first.to_dict()
    assert spent == {
        "model_calls": 1,
        "output_tokens": 1,
        "evaluations": 1,
        "seconds": 4.0,
        "ceilings": budget.to_document(),
    }

    later_clock = FakeClock(0.0)
    second = Meter(budget, used=spent, clock=later_clock)
    assert (second.model_calls, second.output_tokens, second.evaluations) == (1, 1, 1)
    later_clock.now += 5.9
    second.check("iteration")
    later_clock.now += 0.1
    with pytest.raises(BudgetExceeded, match="max_seconds"):
        second.check("iteration")
    second.count_evaluation()
    with pytest.raises(BudgetExceeded, match="max_evaluations"):
        second.check_evaluation()


def test_a_meter_refuses_bad_used_counts():
    with pytest.raises(ValueError):
        Meter(used={"model_calls": -1})
    with pytest.raises(ValueError):
        Meter(used={"seconds": "a while"})


def test_a_meter_adopts_a_budget_only_when_it_has_none():
    meter = Meter()
    meter.adopt(Budget(max_model_calls=2))
    assert meter.budget == Budget(max_model_calls=2)
    meter.adopt(Budget(max_model_calls=9))
    assert meter.budget == Budget(max_model_calls=2)


class Recorder(Hooks):
    def __init__(self):
        self.calls = []

    def on_model_call(self, role, request, response):
        self.calls.append((role, request.parts, response.text))


def test_hooked_model_checks_counts_and_reports_every_call():
    hooks = Recorder()
    inner = ScriptedChatModel(["first reply", "second reply"], model_id="scripted-x")
    model = HookedModel(inner, Meter(Budget(max_model_calls=1)), hooks)
    assert (model.model_id, model.provider) == ("scripted-x", "scripted")
    assert model.complete(request()).text == "first reply"
    assert hooks.calls == [("refiner", ("hello",), "first reply")]
    assert model.meter.model_calls == 1 and model.meter.output_tokens == 3
    with pytest.raises(BudgetExceeded):
        model.complete(request())
    assert len(inner.requests) == 1, "the refused call never reached the model"


def test_hooked_model_does_not_wrap_itself():
    with pytest.raises(ValueError):
        HookedModel(HookedModel(ScriptedChatModel(["x"])))


def test_hooks_do_nothing_by_default_and_stage_is_a_plain_context_manager():
    hooks = Hooks()
    with hooks.stage("baseline") as entered:
        assert entered is None
    assert hooks.on_iteration(object()) is None
    assert hooks.on_warning("careful") is None
    assert hooks.on_model_call("refiner", request(), None) is None
