"""Run a coroutine on a fresh event loop in its own thread: Playwright's sync API (browser tests earlier in the same
session) leaves an event loop attached to the main thread, where asyncio.run() refuses to start another."""

import asyncio
from concurrent.futures import ThreadPoolExecutor


def run_in_own_loop(coroutine):
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
