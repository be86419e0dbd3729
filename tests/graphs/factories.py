"""Workspaces and graphs for the graphs tests, created through the real services."""

from __future__ import annotations

from accounts.services import Actor
from graphs import services
from graphs.demo import TWO_HOP_GRAPH, seed_demo_graphs

SYSTEM = Actor.system()


def make_workspace(slug: str = "ws", **options):
    """A seeded workspace (skeleton unless `graph` is given), its seed active."""
    return services.workspace_create(actor=SYSTEM, slug=slug, title=slug.title(), **options).workspace


def make_empty_workspace(slug: str = "empty"):
    return services.workspace_create(actor=SYSTEM, slug=slug, seed=False)


def make_demo_workspace():
    """two-hop-qa: skeleton #0, the five-node graph #1 (active)."""
    return seed_demo_graphs(actor=SYSTEM).workspace


__all__ = ["SYSTEM", "TWO_HOP_GRAPH", "make_demo_workspace", "make_empty_workspace", "make_workspace"]
