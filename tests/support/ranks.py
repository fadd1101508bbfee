"""Run a test's ranks as spawned processes under a watchdog, so that a hang fails the test, not CI.

    got = run_ranks(_worker, 2, str(tmp_path / "store"), extra1, ...)   # target(rank, world, store, *extra, queue)

Each rank puts one tuple, its rank first, on the queue; the tuples come back sorted by rank. A rank that neither
finishes nor fails within `timeout` seconds fails the test ("a hang"); every process is joined, or killed.
"""

from __future__ import annotations

import queue as queues

import pytest


def run_ranks(target, world: int, store: str, *extra, timeout: float = 240) -> list[tuple]:
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=target, args=(r, world, store, *extra, queue)) for r in range(world)]
    for p in procs:
        p.start()
    try:
        return sorted((queue.get(timeout=timeout) for _ in procs), key=lambda g: g[0])
    except queues.Empty:
        pytest.fail(f"a rank neither finished nor failed within {timeout:.0f} s: a hang")
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
