"""Agent runs and their steps. Rows are written only by trajectories.services (ingest), never edited afterwards."""

from django.db import models

from common.leases.models import Leased

from .choices import EVALUATION_SOURCE, JobStatus, Outcome


class RunQuerySet(models.QuerySet):
    def production(self) -> "RunQuerySet":
        """Runs agents sent in from their work: what counts, charts and the explorer show by default."""
        return self.exclude(source=EVALUATION_SOURCE)

    def evaluation(self) -> "RunQuerySet":
        """Runs that answered evaluation jobs (gate evidence)."""
        return self.filter(source=EVALUATION_SOURCE)


# What a filter of the explorer other than text and tool, or its totals, reads of a run (see Run.Meta.indexes).
TOTALS_WALK_COLUMNS = (
    "source",
    "intent",
    "outcome",
    "score",
    "cost",
    "step_count",
    "duration_seconds",
    "total_tokens",
    "created_at",
)


class Run(models.Model):
    """One agent run, identified by (source, external_id). Step totals are denormalized at ingest."""

    source = models.CharField(max_length=100)
    external_id = models.CharField(max_length=200)
    task = models.TextField(blank=True)
    intent = models.CharField(max_length=200, blank=True, help_text="the declared intent label, raw")
    outcome = models.CharField(max_length=10, choices=Outcome.choices, default=Outcome.UNKNOWN)
    score = models.FloatField(null=True, blank=True)
    graph_workspace = models.CharField(max_length=100, blank=True)
    graph_revision = models.CharField(max_length=100, blank=True)
    # The content revision of the procedure version the run followed (what GET /api/v1/procedures sends as
    # X-Waymark-Revision): outcomes are attributed to a canary's arms by it (uplift's watch). A database default too,
    # so writers that name their columns (COPY in bench/) need not know it.
    procedure_revision = models.CharField(max_length=100, blank=True, default="", db_default="")
    metadata = models.JSONField(default=dict, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    step_count = models.PositiveIntegerField(default=0)
    total_tokens = models.PositiveBigIntegerField(default=0)
    cost = models.FloatField(default=0.0)
    tools = models.JSONField(default=list, blank=True, help_text="distinct tools in first-use order (display)")
    duration_seconds = models.FloatField(null=True, blank=True, help_text="ended_at - started_at (set at ingest)")
    # What full-text search reads: task, tools, arguments and observations, bounded (trajectories.core.search). On
    # PostgreSQL a stored generated tsvector column `search_vector` with a GIN index is derived from it (migration
    # 0004, raw SQL: Django does not know that column).
    search_document = models.TextField(blank=True, default="", editable=False)

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=["source", "external_id"], name="trajectories_run_source_external_id"),
        ]
        indexes = [
            models.Index(fields=["outcome", "-id"], name="trajectories_run_outcome"),
            models.Index(fields=["source", "-id"], name="trajectories_run_source"),
            models.Index(fields=["intent", "-id"], name="trajectories_run_intent"),
            models.Index(fields=["graph_workspace", "-id"], name="trajectories_run_workspace"),
            models.Index(fields=["procedure_revision", "-id"], name="trajectories_run_procedure_rev"),
            # keyset pages of the explorer's sorts: (sort key, id)
            models.Index(fields=["score", "id"], name="trajectories_run_score"),
            models.Index(fields=["cost", "id"], name="trajectories_run_cost"),
            models.Index(fields=["step_count", "id"], name="trajectories_run_steps"),
            models.Index(fields=["duration_seconds", "id"], name="trajectories_run_duration"),
            # descending sorts of nullable keys: indexes in that order on PostgreSQL (migration 0004, raw SQL)
            models.Index(fields=["created_at", "id"], name="trajectories_run_received_id"),
            # The explorer's totals walk the newest matching runs (selectors.run_totals): on PostgreSQL a covering
            # index on id INCLUDE TOTALS_WALK_COLUMNS (trajectories_run_totals_walk, migration 0009) lets the walk read
            # the index alone (an index-only scan). It is PostgreSQL's only, like 0004's, so not declared here
            # (migration 0011): SQLite cannot build it (models.W040).
        ]

    def __str__(self) -> str:
        return f"{self.source}/{self.external_id}"


class Step(models.Model):
    """One tool call of a run, normalized by trajectories.core.normalize_steps (secret-like argument keys dropped)."""

    # No index of its own: the unique (run, ordinal) constraint leads with the run (a second index on it only slowed
    # every insert, and made the planner sort steps that constraint's index reads in order).
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="steps", db_index=False)
    ordinal = models.PositiveIntegerField()
    tool = models.CharField(max_length=60)
    action_family = models.CharField(max_length=40)
    arguments = models.JSONField(default=dict, blank=True)
    observation = models.TextField(blank=True)
    ok = models.BooleanField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    input_tokens = models.PositiveIntegerField(default=0)
    cached_input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cost = models.FloatField(default=0.0)

    class Meta:
        ordering = ["run_id", "ordinal"]
        constraints = [
            models.UniqueConstraint(fields=["run", "ordinal"], name="trajectories_step_run_ordinal"),
        ]
        indexes = [models.Index(fields=["tool", "run"], name="trajectories_step_tool_run")]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.ordinal} {self.tool}"

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.cached_input_tokens + self.output_tokens

    @property
    def duration(self) -> float | None:
        if self.started_at is None or self.ended_at is None:
            return None
        return max(0.0, (self.ended_at - self.started_at).total_seconds())


class RunDayQuerySet(models.QuerySet):
    def production(self) -> "RunDayQuerySet":
        return self.exclude(source=EVALUATION_SOURCE)

    def evaluation(self) -> "RunDayQuerySet":
        return self.filter(source=EVALUATION_SOURCE)


class RunSums(models.Model):
    """Runs by source, intent and outcome with their steps, tokens and cost: the columns RunDay and RunTotal share."""

    source = models.CharField(max_length=100)
    intent = models.CharField(max_length=200, blank=True)
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    runs = models.PositiveBigIntegerField(default=0)
    steps = models.PositiveBigIntegerField(default=0)
    tokens = models.PositiveBigIntegerField(default=0)
    cost = models.FloatField(default=0.0)

    objects = RunDayQuerySet.as_manager()

    class Meta:
        abstract = True


class RunDay(RunSums):
    """Runs received on one day (in settings.TIME_ZONE) by source, intent and outcome, with their steps, tokens and
    cost: kept by ingest in its own transaction (trajectories.rollup), read by the dashboard and the explorer's
    totals instead of scanning every run."""

    day = models.DateField()

    class Meta:
        ordering = ["day", "source", "intent", "outcome"]
        constraints = [
            models.UniqueConstraint(fields=["day", "source", "intent", "outcome"], name="trajectories_runday_key"),
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.source}/{self.intent or '-'} {self.outcome}: {self.runs}"


class RunTotal(RunSums):
    """Every run ever received by source, intent and outcome, with their steps, tokens and cost: RunDay without the
    day, so totals over all days read a few hundred rows rather than every day's (trajectories.rollup keeps both in
    the ingest's transaction)."""

    class Meta:
        ordering = ["source", "intent", "outcome"]
        constraints = [
            models.UniqueConstraint(fields=["source", "intent", "outcome"], name="trajectories_runtotal_key"),
        ]

    def __str__(self) -> str:
        return f"{self.source}/{self.intent or '-'} {self.outcome}: {self.runs}"


class Job(Leased):
    """An evaluation job an agent claims over the API with a lease and answers with a run (trajectories.jobs).

    `subject` names what the job belongs to (e.g. "procedures.replayrun:12"), so the owning app can find its jobs.
    The lease columns are common.leases' (`lease_owner` is the claim's `worker`: informational only).
    Written only by trajectories.job_services.
    """

    kind = models.CharField(max_length=60)
    subject = models.CharField(max_length=120, blank=True)
    payload = models.JSONField(default=dict)
    status = models.CharField(max_length=10, choices=JobStatus.choices, default=JobStatus.QUEUED)
    # The token of the latest claim: the only one whose answer is accepted (trajectories.job_services.job_complete).
    claimed_by_token = models.ForeignKey(
        "accounts.ApiToken", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    attempts = models.PositiveIntegerField(default=0)
    result_run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    deadline = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["kind", "status", "id"], name="trajectories_job_claim"),
            models.Index(fields=["subject"], name="trajectories_job_subject"),
        ]

    def __str__(self) -> str:
        return f"job {self.pk} ({self.kind}, {self.status})"
