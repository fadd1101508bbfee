"""Run jobs (SFT runs, ablation cells) in worker processes under one progress bar with a
time-left estimate.

Every job writes FOLDER/metrics.jsonl with one line per step (SFT and RL both do), so the
parent reads progress from those files: no channel between processes, and a resumed job's
finished steps count as already done. Each step is weighted by an estimate of its cost, so
the estimate holds when cheap and dear jobs share the bar.
"""
from __future__ import annotations

import json
import os
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Callable


@dataclass(frozen=True)
class Job:
    name: str
    fn: Callable  # a module-level function (picklable), called as fn(*args) in a worker; returns a dict
    args: tuple
    folder: Path  # where the job writes metrics.jsonl
    steps: int  # steps the job runs when nothing stops it early
    weight: float = 1.0  # relative cost of one of its steps


def steps_done(folder: str | Path) -> int:
    """The last step logged in FOLDER/metrics.jsonl (0 when none; a half-written line is ignored)."""
    path = Path(folder) / "metrics.jsonl"
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            lines = f.read().splitlines()
    except OSError:
        return 0
    for line in reversed(lines):
        try:
            return int(json.loads(line)["step"])
        except (ValueError, KeyError, TypeError):
            continue
    return 0


def _init_worker(threads: int) -> None:
    import torch

    torch.set_num_threads(max(1, threads))


def split_cores(n_jobs: int, workers: int = 0) -> tuple[int, int]:
    """(worker processes, torch threads each) that use every core without oversubscribing."""
    cores = os.cpu_count() or 1
    workers = max(1, min(workers or cores, n_jobs or 1))
    return workers, max(1, cores // workers)


def run_jobs(jobs: list[Job], workers: int = 0, desc: str = "jobs", progress: bool = True,
             poll_s: float = 1.0, left: str = "left") -> list[dict]:
    """Run the jobs in `workers` spawned processes (cores // workers threads each); results in job order.

    A job that raises is returned as {"name", "status": "failed", "error"}; the others go on.
    `left` labels the estimate ("left at most" when jobs may stop before their steps)."""
    from tqdm.auto import tqdm

    workers, threads = split_cores(len(jobs), workers)
    total = sum(j.steps * j.weight for j in jobs) or 1.0

    def units(finished: set) -> float:
        return sum(j.steps * j.weight if j.name in finished else min(steps_done(j.folder), j.steps) * j.weight
                   for j in jobs)

    results: dict[str, dict] = {}
    fmt = "{desc}: {percentage:3.0f}%|{bar}| {elapsed} elapsed, ~{remaining} " + left + "{postfix}"
    bar = tqdm(total=total, initial=units(set()), desc=desc, disable=not progress, bar_format=fmt, smoothing=0)
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn"), initializer=_init_worker,
                             initargs=(threads,)) as pool:
        pending = {pool.submit(j.fn, *j.args): j for j in jobs}
        while pending:
            done, _ = wait(pending, timeout=poll_s, return_when=FIRST_COMPLETED)
            for fut in done:
                job = pending.pop(fut)
                try:
                    results[job.name] = fut.result()
                except Exception as exc:  # noqa: BLE001 - a dead worker fails its job, not the others
                    results[job.name] = {"name": job.name, "status": "failed", "error": f"{type(exc).__name__}: {exc}"}
            bar.n = units(set(results))
            failed = sum(1 for r in results.values() if r.get("status") == "failed")
            bar.set_postfix_str(f"{len(results)}/{len(jobs)} done" + (f", {failed} failed" if failed else ""), refresh=False)
            bar.refresh()
    bar.close()
    return [results[j.name] for j in jobs]

