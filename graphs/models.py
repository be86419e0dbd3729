"""Persistence of procedural graphs: workspaces and their append-only revision chains (DESIGN.md §5)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from graphs.core import DEFAULT_ATTRIBUTE_FIELDS, DEFAULT_NODE_TYPES, DEFAULT_RELATIONS


def default_vocabulary() -> dict[str, list[str]]:
    return {
        "relations": list(DEFAULT_RELATIONS),
        "node_types": list(DEFAULT_NODE_TYPES),
        "attribute_fields": list(DEFAULT_ATTRIBUTE_FIELDS),
    }


class Workspace(models.Model):
    """One task family an agent works on; `active_revision` is the single pointer to the graph agents receive."""

    slug = models.SlugField(max_length=100, unique=True)
    title = models.CharField(max_length=200, blank=True)
    task_description = models.TextField(blank=True)
    vocabulary = models.JSONField(default=default_vocabulary)
    active_revision = models.ForeignKey(
        "graphs.Revision", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    @property
    def display_title(self) -> str:
        return self.title or self.slug


class RevisionQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise TypeError("revisions are append-only: they are never updated")

    def delete(self):
        raise TypeError("revisions are append-only: they are never deleted")


class Revision(models.Model):
    """One immutable JSON document in the chain of one (workspace, kind); seq 0 is the first."""

    class Kind(models.TextChoices):
        GRAPH = "graph"
        REJECTIONS = "rejections"
        TRACES = "traces"
        CHECKPOINTS = "checkpoints"

    workspace = models.ForeignKey(Workspace, on_delete=models.PROTECT, related_name="revisions")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    seq = models.PositiveIntegerField()
    digest = models.CharField(max_length=64, help_text="SHA-256 of the canonical JSON of the document only")
    parent_digest = models.CharField(max_length=64, null=True, blank=True)
    document = models.JSONField()
    meta = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = RevisionQuerySet.as_manager()

    class Meta:
        ordering = ["workspace", "kind", "-seq"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "kind", "seq"], name="graphs_revision_one_per_seq"),
        ]
        indexes = [models.Index(fields=["workspace", "kind", "digest"], name="graphs_revision_digest")]

    def __str__(self) -> str:
        return f"{self.workspace_id}/{self.kind}#{self.seq} {self.digest[:12]}"

    def save(self, *args, **kwargs):
        if self.pk is not None and not self._state.adding:
            raise TypeError("revisions are append-only: they are never updated")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise TypeError("revisions are append-only: they are never deleted")

    @property
    def short_digest(self) -> str:
        return self.digest[:12]

    @property
    def origin(self) -> str:
        return str((self.meta or {}).get("origin", ""))

    @property
    def validation_score(self):
        return (self.meta or {}).get("validation_score")
