"""The demo seeders the apps register (config.demo_seeding): seed_demo runs them in dependency order."""

import pytest

from config.demo_seeding import DemoSeeder, SeederOrderError, demo_seeders, in_dependency_order


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
