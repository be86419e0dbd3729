"""Calls released together on their own threads (each its own database connection): the races of the concurrency
tests."""

import threading

from django.db import connection


def run_at_once(calls):
    """Run each call in its own thread (own connection), released together; returns results or exceptions."""
    barrier = threading.Barrier(len(calls))
    results = [None] * len(calls)

    def run(index, call):
        try:
            barrier.wait()
            results[index] = call()
        except Exception as exc:
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results
