"""Leases: the one mechanism by which a worker holds a row of background work (docs/decisions.md, "Leases").

`models.Leased` is the abstract model with the two lease columns; `services` holds every write of a lease (claim,
write while held, heartbeat, release, the take-over of dead workers' leases) and the one `LeaseLost` and
`RunCancelled`. Everything of `services` is re-exported here; import `Leased` from common.leases.models (a models
module, imported once the app registry is ready).

Used by: offline replays (procedures), graph evolution runs and certifications (graphs), proposal runs (intents),
rubric jobs (rubrics), webhook delivery attempts (reviews), the watch after activation (uplift) and evaluation jobs
(trajectories: their columns and `lease_free`; agents claim them over the API, so the claim is their own).
"""

from .services import (
    RELEASED,
    LeaseLost,
    RunCancelled,
    lease_claim,
    lease_claim_row,
    lease_claim_row_reading,
    lease_clear,
    lease_free,
    lease_heartbeat,
    lease_held,
    lease_holders,
    lease_live,
    lease_release,
    lease_transaction,
    lease_until,
    lease_wait,
    lease_write,
    lease_write_alone,
    leases_end,
    owner_name,
    register_lease_takeover,
)

__all__ = [
    "RELEASED",
    "LeaseLost",
    "RunCancelled",
    "lease_claim",
    "lease_claim_row",
    "lease_claim_row_reading",
    "lease_clear",
    "lease_free",
    "lease_heartbeat",
    "lease_held",
    "lease_holders",
    "lease_live",
    "lease_release",
    "lease_transaction",
    "lease_until",
    "lease_wait",
    "lease_write",
    "lease_write_alone",
    "leases_end",
    "owner_name",
    "register_lease_takeover",
]
