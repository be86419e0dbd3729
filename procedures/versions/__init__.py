"""A procedure's versions after mining: services (re-run, re-split, amend, recertify, the rubric floor) and split
(the seeded held-out split computed in the database, and the run lists a version or replay keeps)."""
