"""What goes into and comes out of a sandbox worker: limits, results, statuses, the HMAC framing."""

from __future__ import annotations

import hashlib
import hmac
import struct
from dataclasses import dataclass

# no SysV IPC objects or POSIX message queues: nothing a program could leave for the next one
NO_IPC = {
    "kernel.msgmni": "0",
    "kernel.shmall": "0",
    "kernel.shmmax": "0",
    "kernel.sem": "0 0 0 0",
    "kernel.shm_rmid_forced": "1",
    "fs.mqueue.queues_max": "0",
}
STATUSES = ("passed", "failed", "timeout", "memory", "output_limit", "sandbox_error")
HOW_TO_START = (
    "Start it with `sudo scripts/setup_docker.sh` (installs docker.io, starts dockerd, builds the "
    "sandbox image) or `dockerd > /tmp/dockerd.log 2>&1 &`. A less isolated backend runs only "
    "if you choose it: DACA_BENCH_SANDBOX=local-unsafe."
)


@dataclass(frozen=True)
class ExecResult:
    status: str  # one of STATUSES
    returncode: int | None
    stdout: str  # capped
    stderr: str  # capped
    seconds: float
    backend: str  # "docker" or "local-unsafe"

    @property
    def passed(self) -> bool:
        return self.status == "passed"


class SandboxUnavailable(RuntimeError):
    """The Docker engine (or the sandbox image) is not reachable; the message says how to fix it."""


@dataclass(frozen=True)
class Limits:
    mem_mb: int = 512  # address space of each program process (RLIMIT_AS)
    container_mem_mb: int = 1024  # memory cgroup of a container (no swap)
    pids: int = 64  # pids cgroup of a container
    tmp_mb: int = 64  # size of the tmpfs /tmp
    fsize_mb: int = 16  # largest file a program may write
    output_cap: int = 16384  # bytes of stdout and of stderr kept in a result
    output_limit: int = 1 << 20  # more output than this kills the program: status output_limit
    grace: float = 5.0  # seconds past the timeout before the client declares a worker dead


class WorkerBroken(Exception):
    """The worker or its container died, hung or spoke nonsense."""


def sandbox_error(msg: str, backend: str, seconds: float = 0.0) -> ExecResult:
    return ExecResult("sandbox_error", None, "", msg, seconds, backend)


def frame_mac(key: bytes, kind: bytes, seq: int, *parts: bytes) -> bytes:
    head = struct.pack(">cQ", kind, seq) + b"".join(struct.pack(">Q", len(p)) for p in parts)
    return hmac.new(key, head + b"".join(parts), hashlib.sha256).digest()
