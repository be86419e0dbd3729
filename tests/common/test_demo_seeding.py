"""The demo seeders the apps register (common.demo_seeding): seed_demo runs them in dependency order."""

import pytest

from common.demo_seeding import (
    DemoSeeder,
    SeedContext,
    SeederOrderError,
    demo_seeders,
    in_dependency_order,
    run_seeders,
)


def step(ctx):
    return ""


def test_every_app_registers_its_seeders_and_they_run_in_dependency_order():
    assert [seeder.name for seeder in demo_seeders()] == [
        "users",
        "agent-token",
        "runs",
        "graphs",
        "procedures",
        "reviews",
        "certification",
        "watches",
        "intents",
        "rubrics",
    ]


def test_a_seeder_runs_after_those_it_names_even_when_registered_first():
    late = DemoSeeder("late", step, after=("early",))
    early = DemoSeeder("early", step)
    assert [seeder.name for seeder in in_dependency_order([late, early])] == ["early", "late"]


def test_a_seeder_naming_an_unknown_one_is_refused():
    with pytest.raises(SeederOrderError, match="unknown seeders"):
        in_dependency_order([DemoSeeder("graphs", step, after=("runs",))])


def test_seeders_waiting_for_each_other_are_refused():
    with pytest.raises(SeederOrderError, match="wait for each other"):
        in_dependency_order([DemoSeeder("a", step, after=("b",)), DemoSeeder("b", step, after=("a",))])


def test_a_seeder_runs_after_those_it_needs():
    late = DemoSeeder("late", step, needs=("early",))
    early = DemoSeeder("early", step)
    assert [seeder.name for seeder in in_dependency_order([late, early])] == ["early", "late"]


def test_every_seeder_that_reads_the_demo_runs_or_users_says_it_needs_them():
    needs = {seeder.name: set(seeder.needs) for seeder in demo_seeders()}
    assert needs["procedures"] == {"runs"}
    assert needs["reviews"] == {"users"}
    assert needs["intents"] == needs["rubrics"] == {"users", "runs"}


def named(name: str, *, needs=(), fails=False) -> DemoSeeder:
    def run(ctx):
        if fails:
            raise ValueError(f"{name} broke\nsecond line")
        ctx.notes.append(name)
        return f"{name}: done"

    return DemoSeeder(name, run, needs=needs)


def test_a_failing_seeder_is_reported_and_those_needing_it_are_skipped_while_the_rest_run():
    ctx = SeedContext(actor=None, token_path=None)
    seeders = [
        named("users"),
        named("runs", fails=True),
        named("graphs"),
        named("procedures", needs=("runs",)),
        named("reviews", needs=("procedures",)),
        named("rubrics", needs=("users",)),
    ]

    outcomes = {outcome.name: outcome for outcome in run_seeders(ctx, seeders)}

    assert {name: outcome.status for name, outcome in outcomes.items()} == {
        "users": "done",
        "runs": "failed",
        "graphs": "done",
        "procedures": "skipped",
        "reviews": "skipped",  # needs one that was skipped
        "rubrics": "done",
    }
    assert outcomes["runs"].line == "runs: failed (ValueError: runs broke)"
    assert "Traceback" in outcomes["runs"].traceback and "runs broke" in outcomes["runs"].traceback
    assert outcomes["reviews"].line == "reviews: skipped (needs procedures, which did not finish)"
    assert ctx.notes == ["users", "graphs", "rubrics"]
