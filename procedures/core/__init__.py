"""Pure algorithms of procedures: no Django import, no I/O."""

from .learn import ProcedureCandidate, ProcedureStep, learn_procedure

__all__ = ["ProcedureCandidate", "ProcedureStep", "learn_procedure"]
