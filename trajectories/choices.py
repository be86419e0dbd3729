"""The trajectories app's value sets: what other apps may name without reading its models."""

from django.db import models


class Outcome(models.TextChoices):
    SUCCESS = "success", "success"
    FAILURE = "failure", "failure"
    UNKNOWN = "unknown", "unknown"


class JobStatus(models.TextChoices):
    QUEUED = "queued", "queued"
    LEASED = "leased", "leased"
    DONE = "done", "done"
    EXPIRED = "expired", "expired"


# Runs an agent sent as the answer to an evaluation job (live replays, evolution evaluations) carry this source
# (trajectories.job_services); they are evidence for gates, not production traffic, and pages keep them apart.
EVALUATION_SOURCE = "waymark-evaluation"
