"""Every write of replays, by concern: lifecycle (queue, finish, fail, settle), offline (leased replays run here),
live (replays answered by agents as evaluation jobs)."""
