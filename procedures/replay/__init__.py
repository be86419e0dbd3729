"""Replays of a procedure version on held-out runs: services/ (lifecycle — queue, finish, fail, settle —, offline —
replays run here under a lease —, live — replays agents answer as evaluation jobs), certification (a replay's
certified case pairs) and spooled_cases (a replay's cases, spooled to disk as they come)."""
