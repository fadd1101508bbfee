"""Test double of daca_bench.containers for code-task logic tests that cannot wait for Docker:
runs each (code, test) pair in a host subprocess (NO isolation: only for the repo's own fixture
programs) and reports "passed" only if a sentinel printed after the test code is reached."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass

SENTINEL = "__daca_double_reached_end__"


class SandboxUnavailable(RuntimeError):
    pass


@dataclass(frozen=True)
class ExecResult:
    status: str
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    backend: str = "test-double"


def run_tests(code: str, test: str, timeout: float = 5.0) -> ExecResult:
    program = f"{code}\n\n{test}\n\nprint({SENTINEL!r})\n"
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-I", "-c", program], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return ExecResult("timeout", None, "", "", time.perf_counter() - start)
    passed = proc.returncode == 0 and proc.stdout.rstrip().endswith(SENTINEL)
    return ExecResult(
        "passed" if passed else "failed",
        proc.returncode,
        proc.stdout[-2000:],
        proc.stderr[-2000:],
        time.perf_counter() - start,
    )


def run_batch(jobs, timeout: float = 5.0, workers=None):
    return [run_tests(code, test, timeout) for code, test in jobs]


class Unavailable:
    """A sandbox whose engine is down."""

    SandboxUnavailable = SandboxUnavailable

    @staticmethod
    def run_batch(jobs, timeout=5.0, workers=None):
        raise SandboxUnavailable("docker daemon not reachable (test double)")


class Scripted:
    """A sandbox that answers fixed verdicts, in order (for the verdict -> reward mapping)."""

    SandboxUnavailable = SandboxUnavailable

    def __init__(self, verdicts):
        self.verdicts = list(verdicts)

    def run_batch(self, jobs, timeout=5.0, workers=None):
        return [ExecResult(v, 0, "", "", 0.0) for v, _ in zip(self.verdicts, jobs)]
