"""Run jobs (SFT runs, ablation cells) in worker processes under one progress bar with a
time-left estimate.

Every job writes FOLDER/metrics.jsonl with one line per step (SFT and RL both do), so the
parent reads progress from those files: no channel between processes, and a resumed job's
finished steps count as already done. Each step is weighted by an estimate of its cost, so
the estimate holds when cheap and dear jobs share the bar. The time left is measured from the
first step the jobs log (starting workers and loading models are no steps) and shown only once
it has been measured for a few seconds: no bound before there is a pace to bound with.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path


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


class Pace:
    """Time left from the pace measured since the first progress seen (not since the start, which
    holds the workers' start-up): '' until `min_s` seconds of progress have been measured."""

    def __init__(self, total: float, min_s: float = 5.0, clock: Callable[[], float] = time.monotonic):
        self.total, self.min_s, self.clock = total, min_s, clock
        self.first: tuple[float, float] | None = None  # (time, units) when progress was first seen

    def left(self, done: float, initial: float, label: str = "left") -> str:
        now = self.clock()
        if self.first is None:
            if done > initial:
                self.first = (now, done)
            return ""
        t0, u0 = self.first
        if now - t0 < self.min_s or done <= u0:
            return ""
        from tqdm.auto import tqdm

        return f"~{tqdm.format_interval((self.total - done) * (now - t0) / (done - u0))} {label}"


def _init_worker(threads: int, parent: int | None = None) -> None:
    import torch

    torch.set_num_threads(max(1, threads))
    _stop_with_parent(parent)


def _stop_with_parent(parent: int | None) -> None:
    """Linux: SIGTERM this worker when the process that started the grid dies (killed, crashed), so no
    orphan keeps training and writing into the grid's folders; a cell then checkpoints and stops
    (the trainer saves on SIGTERM) and a rerun resumes it. Elsewhere a no-op."""
    global _PARENT
    _PARENT = parent
    if parent is None or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity: `taskset`, a container's cpuset),
    not every core of the machine."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def split_cores(n_jobs: int, workers: int = 0) -> tuple[int, int]:
    """(worker processes, torch threads each) that use every usable core without oversubscribing."""
    cores = usable_cores()
    workers = max(1, min(workers or cores, n_jobs or 1))
    return workers, max(1, cores // workers)


_PARENT = None  # in a worker: the pid of the process that started the pool


def _start(pid_file: str, fn: Callable, args: tuple):
    """In the worker: note which process runs this job (to name the job a killed worker took), then run
    it; if the starting process died meanwhile, nobody waits for the result or the next job: exit."""
    Path(pid_file).write_text(str(os.getpid()))
    result = fn(*args)
    if _PARENT is not None and os.getppid() != _PARENT:
        os._exit(0)
    return result


def _killed(processes: dict) -> set[int]:
    """Pids of the workers that died by a signal other than the pool's own SIGTERM (SIGKILL: the OOM killer)."""
    out = set()
    for pid, proc in processes.items():
        proc.join(timeout=10)
        if proc.exitcode is not None and proc.exitcode < 0 and proc.exitcode != -signal.SIGTERM:
            out.add(pid)
    return out


def _signal_name(code: int | None) -> str:
    try:
        return signal.Signals(-code).name if code is not None and code < 0 else f"exit code {code}"
    except ValueError:
        return f"signal {-code}"


def run_jobs(
    jobs: list[Job],
    workers: int = 0,
    desc: str = "jobs",
    progress: bool = True,
    poll_s: float = 1.0,
    left: str = "left",
    lost_retries: int = 1,
) -> list[dict]:
    """Run the jobs in `workers` spawned processes (cores // workers threads each); results in job order.

    A job that raises is returned as {"name", "status": "failed", "error"}; the others go on.
    A worker that dies (SIGKILL from the OOM killer, a segfault) breaks the pool: a new pool then
    resumes every unfinished job (they resume from their checkpoints), the job whose worker died
    is named in one line and retried up to `lost_retries` times, then reported failed.
    `left` labels the estimate ("left at most" when jobs may stop before their steps)."""
    from tqdm.auto import tqdm

    workers, threads = split_cores(len(jobs), workers)
    total = sum(j.steps * j.weight for j in jobs) or 1.0

    def units(finished: set) -> float:
        return sum(
            j.steps * j.weight if j.name in finished else min(steps_done(j.folder), j.steps) * j.weight for j in jobs
        )

    results: dict[str, dict] = {}
    lost: dict[str, int] = {}  # job -> times its worker died under it
    fmt = "{desc}: {percentage:3.0f}%|{bar}| {elapsed} elapsed{postfix}"
    initial = units(set())
    bar = tqdm(total=total, initial=initial, desc=desc, disable=not progress, bar_format=fmt, smoothing=0)
    pace = Pace(total)
    eta = lambda n: pace.left(n, initial, left)  # noqa: E731 - '' until the pace is measured
    with tempfile.TemporaryDirectory(prefix="daca-jobs-") as pids:
        pid_file = {j.name: os.path.join(pids, str(i)) for i, j in enumerate(jobs)}
        todo, breaks = list(jobs), 0
        while todo:
            broken = _run_pool(todo, workers, threads, pid_file, results, bar, units, poll_s, len(jobs), eta)
            todo = [j for j in jobs if j.name not in results]
            if not broken or not todo:
                break
            breaks += 1
            named = [j for j in todo if _read_pid(pid_file[j.name]) in broken]
            for job in named:
                lost[job.name] = lost.get(job.name, 0) + 1
                why = _signal_name(broken[_read_pid(pid_file[job.name])])
                os.unlink(pid_file[job.name])
                if lost[job.name] > lost_retries:
                    results[job.name] = {
                        "name": job.name,
                        "status": "failed",
                        "worker_lost": lost[job.name],
                        "error": f"its worker process died ({why}) {lost[job.name]} times; "
                        "out of memory? (the OOM killer sends SIGKILL)",
                    }
                    tqdm.write(
                        f"{desc}: the worker running {job.name} died again ({why}); giving up on it", file=sys.stderr
                    )
                else:
                    tqdm.write(
                        f"{desc}: the worker running {job.name} died ({why}); retrying it from its "
                        f"checkpoint in a new pool, beside the {len(todo) - 1} other unfinished",
                        file=sys.stderr,
                    )
            todo = [j for j in jobs if j.name not in results]
            if not named and todo:  # a worker died that held no job we can name
                if breaks > len(jobs) * (lost_retries + 1):
                    for job in todo:
                        results[job.name] = {
                            "name": job.name,
                            "status": "failed",
                            "error": f"worker processes kept dying ({breaks} times)",
                        }
                    break
                tqdm.write(
                    f"{desc}: a worker process died; resuming the {len(todo)} unfinished in a new pool", file=sys.stderr
                )
    bar.close()
    for name, n in lost.items():
        if results[name].get("status") != "failed":
            results[name] = {**results[name], "worker_lost": n}
    return [results[j.name] for j in jobs]


def _read_pid(path: str) -> int | None:
    try:
        return int(Path(path).read_text())
    except (OSError, ValueError):
        return None


def _run_pool(
    todo: list[Job],
    workers: int,
    threads: int,
    pid_file: dict,
    results: dict,
    bar,
    units,
    poll_s: float,
    n_jobs: int,
    eta: Callable[[float], str] = lambda n: "",
) -> dict[int, int]:
    """Run `todo` in one pool until done or broken; {pid: exit code} of the workers that killed it."""
    processes: dict = {}
    with ProcessPoolExecutor(
        min(workers, len(todo)),
        mp_context=get_context("spawn"),
        initializer=_init_worker,
        initargs=(threads, os.getpid()),
    ) as pool:
        pending = {pool.submit(_start, pid_file[j.name], j.fn, j.args): j for j in todo}
        broken = False
        while pending:
            processes.update(getattr(pool, "_processes", None) or {})  # to read the dead worker's exit code
            done, _ = wait(pending, timeout=poll_s, return_when=FIRST_COMPLETED)
            for fut in done:
                job = pending.pop(fut)
                try:
                    results[job.name] = fut.result()
                except BrokenProcessPool:
                    broken = True
                except Exception as exc:  # noqa: BLE001 - a failing job fails alone
                    results[job.name] = {"name": job.name, "status": "failed", "error": f"{type(exc).__name__}: {exc}"}
            bar.n = units(set(results))
            failed = sum(1 for r in results.values() if r.get("status") == "failed")
            left = eta(bar.n)
            bar.set_postfix_str(
                (f"{left}, " if left else "")
                + f"{len(results)}/{n_jobs} done"
                + (f", {failed} failed" if failed else ""),
                refresh=False,
            )
            bar.refresh()
    if not broken:
        return {}
    killed = _killed(processes)
    return {pid: processes[pid].exitcode for pid in killed} or {-1: None}
