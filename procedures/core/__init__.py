"""Pure algorithms of procedures: no Django import, no I/O."""

from .gate import GateCheck, GateReport, MetricCheck, regression_gate
from .learn import ProcedureCandidate, ProcedureStep, learn_procedure
from .replay import (
    DEFAULT_PROCEDURE_CHECKS,
    HIGHER_IS_BETTER,
    ArmResult,
    CaseResult,
    CaseRun,
    ReplayCase,
    ReplayReport,
    replay_procedure,
)

__all__ = [
    "DEFAULT_PROCEDURE_CHECKS",
    "HIGHER_IS_BETTER",
    "ArmResult",
    "CaseResult",
    "CaseRun",
    "GateCheck",
    "GateReport",
    "MetricCheck",
    "ProcedureCandidate",
    "ProcedureStep",
    "ReplayCase",
    "ReplayReport",
    "learn_procedure",
    "regression_gate",
    "replay_procedure",
]
