"""The host side of the code sandbox (the image recipe and the in-container worker are in
sandbox/): a pool of long-lived, locked-down Docker containers that run untrusted programs.

Each container (no network, memory and pids limits, read-only root, small tmpfs /tmp, no
capabilities, no-new-privileges, user 10001, docker-init) runs the sandbox/worker/ package, which
executes one program at a time in freshly forked processes with a wall-clock timeout, a CPU
limit, an output cap, kills every leftover process afterwards and reports.  A pass is proven
by the worker (see sandbox/README.md), never inferred from an exit code or printed text.
After each program the client checks the container (process count against its baseline,
liveness, an HMAC on every reply) and replaces it if anything survived or broke.  Docker unreachable raises
SandboxUnavailable; the less isolated local backend runs only when DACA_BENCH_SANDBOX=local-unsafe.

Try it:
  python -m daca_bench sandbox build        # once: debootstrap image, tagged by recipe hash
  python -m daca_bench sandbox selftest     # hostile programs against the live pool
  python -c "from daca_bench.containers import run_tests; print(run_tests('def f(x): return x+1', 'assert f(1) == 2'))"
"""

from .image import build, image_tag
from .pool import Pool, get_pool, run_batch, run_tests
from .protocol import STATUSES, ExecResult, Limits, SandboxUnavailable

__all__ = [
    "ExecResult",
    "Limits",
    "Pool",
    "STATUSES",
    "SandboxUnavailable",
    "build",
    "get_pool",
    "image_tag",
    "run_batch",
    "run_tests",
]
