"""The pool of sandbox workers: thread-safe run() / run_batch() in job order, one lazily created pool per
process, stale containers of dead processes removed."""

from __future__ import annotations

import atexit
import os
import queue
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .image import docker_client, image_exists, image_tag
from .protocol import ExecResult, Limits, SandboxUnavailable
from .slot import Slot


# ---------------------------------------------------------------- the pool
class Pool:
    """Long-lived workers; run() and run_batch() are thread-safe; results keep job order."""

    def __init__(
        self,
        size: int | None = None,
        backend: str | None = None,
        limits: Limits | None = None,
        image: str | None = None,
    ):
        backend = backend or os.environ.get("DACA_BENCH_SANDBOX", "docker") or "docker"
        if backend not in ("docker", "local-unsafe"):
            raise ValueError(f"unknown sandbox backend {backend!r}: use 'docker' or, explicitly, 'local-unsafe'")
        self.backend, self.limits = backend, limits or Limits()
        # one more worker than cores: while one waits on a pipe, the others keep the cores busy
        self.size = size or int(os.environ.get("DACA_BENCH_SANDBOX_WORKERS", 0)) or (os.cpu_count() or 2) + 1
        self.client = self.image = None
        if backend == "docker":
            self.client, self.image = docker_client(), image or image_tag()
            if not image_exists(self.client, self.image):
                raise SandboxUnavailable(
                    f"sandbox image {self.image} is not built: run `python -m daca_bench sandbox "
                    "build` (or scripts/setup_docker.sh)"
                )
            _prune_stale(self.client)
        self.slots = [Slot(self, i) for i in range(self.size)]
        self.free: queue.Queue[Slot] = queue.Queue()
        self.closed = False
        with ThreadPoolExecutor(self.size) as ex:  # start the workers in parallel
            for err in ex.map(_try_start, self.slots):
                if err is not None and all(s.baseline is None for s in self.slots):
                    raise SandboxUnavailable(f"could not start a sandbox worker: {err}")
        for slot in self.slots:
            self.free.put(slot)
        self.executor = ThreadPoolExecutor(self.size, thread_name_prefix="sandbox")

    def run(self, code: str, test: str = "", timeout: float = 5.0) -> ExecResult:
        if self.closed:
            raise RuntimeError("the sandbox pool is closed")
        slot = self.free.get()
        try:
            return slot.execute(code, test, timeout)
        finally:
            self.free.put(slot)

    def run_batch(
        self, jobs: list[tuple[str, str]], timeout: float = 5.0, workers: int | None = None
    ) -> list[ExecResult]:
        if workers is not None and workers != self.size:
            with ThreadPoolExecutor(max(1, workers)) as ex:
                return list(ex.map(lambda j: self.run(j[0], j[1], timeout), jobs))
        return list(self.executor.map(lambda j: self.run(j[0], j[1], timeout), jobs))

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.executor.shutdown(wait=False)
        for slot in self.slots:
            slot.stop()
        if self.client is not None:  # what the background removals have not reached yet
            _remove_labelled(self.client, f"daca-bench.owner={socket.gethostname()}:{os.getpid()}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _try_start(slot: Slot):
    try:
        slot.start()
        return None
    except Exception as e:  # noqa: BLE001
        slot.stop()
        slot.baseline = None
        return e


def _prune_stale(client) -> None:
    """Remove sandbox containers left behind by dead processes on this host."""
    host = socket.gethostname()
    for c in _labelled(client, "daca-bench.sandbox=1"):
        h, _, pid = c.get("Labels", {}).get("daca-bench.owner", "").rpartition(":")
        if h == host and pid.isdigit() and not Path(f"/proc/{pid}").exists():
            _remove_id(client, c["Id"])


def _labelled(client, label: str) -> list[dict]:
    try:  # the low-level call: no per-container inspect that races with removals
        return client.api.containers(all=True, filters={"label": label})
    except Exception:  # noqa: BLE001
        return []


def _remove_labelled(client, label: str) -> None:
    for c in _labelled(client, label):
        _remove_id(client, c["Id"])


def _remove_id(client, container_id: str) -> None:
    try:
        client.api.remove_container(container_id, force=True)
    except Exception:  # noqa: BLE001 - already gone
        pass


_POOL: Pool | None = None
_POOL_LOCK = threading.Lock()


def get_pool(**kwargs) -> Pool:
    """The process-wide pool, created on first use (kwargs go to Pool then) and closed at exit."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL.closed:
            _POOL = Pool(**kwargs)
            atexit.register(_POOL.close)
        return _POOL


def run_tests(code: str, test: str, timeout: float = 5.0) -> ExecResult:
    """Run one program and then its test code; "passed" only when the test provably ran to its end."""
    return get_pool().run(code, test, timeout)


def run_batch(jobs: list[tuple[str, str]], timeout: float = 5.0, workers: int | None = None) -> list[ExecResult]:
    """Run (code, test) jobs in parallel across the pool; results in job order."""
    return get_pool().run_batch(jobs, timeout, workers)
