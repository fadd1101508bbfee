"""One sandbox worker (a locked-down container, or a local process): started, asked to run jobs, checked
after each, replaced when broken."""

from __future__ import annotations

import base64
import hmac
import json
import os
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from typing import TYPE_CHECKING

from .payload import worker_program
from .protocol import (
    NO_IPC,
    STATUSES,
    ExecResult,
    WorkerBroken,
    frame_mac,
    sandbox_error,
)

if TYPE_CHECKING:
    from .pool import Pool


class Slot:
    """One worker: started, asked to run jobs, checked after each, replaced when broken."""

    def __init__(self, pool: Pool, index: int):
        self.pool, self.index = pool, index
        self.container = self.proc = self.sock = self.scratch = None
        self.buf = bytearray()  # worker frames not yet consumed
        self.raw = bytearray()  # docker stream bytes not yet demultiplexed
        self.baseline = None
        self.isolated = False
        self.key, self.seq = b"", 0  # the control stream's key: replies without it are forgeries

    # -- transport
    def _send(self, data: bytes) -> None:
        try:
            if self.sock is not None:
                self.sock.sendall(data)
            else:
                self.proc.stdin.write(data)
                self.proc.stdin.flush()
        except OSError as e:
            raise WorkerBroken(f"cannot write to the worker: {e}") from e

    def _read_some(self, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise WorkerBroken("the worker did not answer in time")
        fd = self.sock.fileno() if self.sock is not None else self.proc.stdout.fileno()
        if not select.select([fd], [], [], left)[0]:
            raise WorkerBroken("the worker did not answer in time")
        data = os.read(fd, 1 << 20) if self.sock is None else self.sock.recv(1 << 20)
        if not data:
            raise WorkerBroken("the worker's stream closed (worker or container died)")
        if self.sock is None:
            self.buf += data
            return
        self.raw += data  # docker's multiplexed stream: 8-byte header (stream, 0, 0, 0, size)
        while len(self.raw) >= 8:
            (size,) = struct.unpack(">I", self.raw[4:8])
            if len(self.raw) < 8 + size:
                break
            if self.raw[0] == 1:
                self.buf += self.raw[8 : 8 + size]
            del self.raw[: 8 + size]

    def _recv(self, deadline: float) -> dict:
        while len(self.buf) < 4 or len(self.buf) < 4 + struct.unpack(">I", self.buf[:4])[0]:
            self._read_some(deadline)
        (n,) = struct.unpack(">I", self.buf[:4])
        frame = bytes(self.buf[4 : 4 + n])
        del self.buf[: 4 + n]
        payload, tag = frame[:-32], frame[-32:]
        if not hmac.compare_digest(tag, frame_mac(self.key, b"R", self.seq, payload)):
            raise WorkerBroken("a reply without the worker's key (forged by a program, or corrupted)")
        try:
            return json.loads(payload)
        except ValueError as e:
            raise WorkerBroken(f"unreadable reply from the worker: {e}") from e

    def _request(self, header: dict, code: str, test: str) -> None:
        self.seq += 1
        parts = [
            json.dumps(header).encode(),
            code.encode("utf-8", "surrogatepass"),
            test.encode("utf-8", "surrogatepass"),
        ]
        parts.append(frame_mac(self.key, b"Q", self.seq, *parts))
        self._send(b"".join(base64.b64encode(p) + b"\n" for p in parts))

    # -- life cycle
    def start(self) -> None:
        self.buf.clear()
        self.raw.clear()
        src = worker_program()
        if self.pool.backend == "docker":
            self._start_container(src)
        else:
            self.scratch = tempfile.mkdtemp(prefix="daca-sandbox-local-")
            lim = self.pool.limits
            cmd = [
                sys.executable,
                "-I",
                "-B",
                "-c",
                src,
                "--mode",
                "local",
                "--scratch",
                self.scratch,
                "--mem-mb",
                str(lim.mem_mb),
                "--fsize-mb",
                str(lim.fsize_mb),
            ]
            if os.geteuid() == 0:  # programs run unprivileged, in their own PID, network and IPC namespaces
                cmd += ["--drop-uid", str(LOCAL_UID_BASE + self.index)]  # one uid per slot: RLIMIT_NPROC is per uid
                if _unshare_works():
                    cmd = [*UNSHARE, *cmd]
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.key, self.seq = os.urandom(32), 0
        self._send(base64.b64encode(self.key) + b"\n")
        ready = self._recv(time.monotonic() + 60)
        if not ready.get("ready"):
            raise WorkerBroken(f"worker did not announce itself: {ready}")
        self.baseline = ready["baseline"]
        self.isolated = bool(ready.get("isolated"))

    def _start_container(self, src: str) -> None:
        lim, client = self.pool.limits, self.pool.client
        self.container = client.containers.create(
            self.pool.image,
            command=[
                "python3",
                "-I",
                "-B",
                "-c",
                src,
                "--mode",
                "container",
                "--scratch",
                "/tmp",
                "--mem-mb",
                str(lim.mem_mb),
                "--fsize-mb",
                str(lim.fsize_mb),
            ],
            name=f"daca-sbx-{os.getpid()}-{self.index}-{int(time.time() * 1000) % 10**8}",
            labels={"daca-bench.sandbox": "1", "daca-bench.owner": f"{socket.gethostname()}:{os.getpid()}"},
            user="10001:10001",
            working_dir="/",
            environment={},
            init=True,
            network_mode="none",
            ipc_mode="none",
            read_only=True,
            tmpfs={"/tmp": f"rw,nosuid,nodev,noexec,size={lim.tmp_mb}m,nr_inodes=4096,mode=1777"},
            sysctls=NO_IPC,
            mem_limit=f"{lim.container_mem_mb}m",
            memswap_limit=f"{lim.container_mem_mb}m",
            pids_limit=lim.pids,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            stdin_open=True,
            tty=False,
            detach=True,
            log_config={"type": "none", "config": {}},
        )
        params = {"stdin": 1, "stdout": 1, "stderr": 0, "stream": 1, "detachKeys": "ctrl-@,ctrl-@"}
        self.sock = self.container.attach_socket(params=params)
        self.sock = getattr(self.sock, "_sock", self.sock)
        self.container.start()

    def stop(self) -> None:
        sock, container, proc, scratch = self.sock, self.container, self.proc, self.scratch
        self.sock = self.container = self.proc = self.scratch = None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass
        if container is not None:  # removal is slow; do not make the next job wait for it
            threading.Thread(target=_remove_quietly, args=(container,), daemon=True).start()
        if proc is not None:
            proc.kill()
            proc.wait()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)

    # -- one job
    def execute(self, code: str, test: str, timeout: float) -> ExecResult:
        """Run one job; a worker that breaks is replaced and the job retried once in a fresh one.
        Twice broken while the program ran: the program did it (failed); never started: sandbox_error."""
        backend, t0, broke, start_errors = self.pool.backend, time.monotonic(), [], []
        lim = self.pool.limits
        header = dict(timeout=timeout, output_cap=lim.output_cap, output_limit=lim.output_limit)
        while len(broke) < 2 and len(start_errors) < 2:
            if self.baseline is None:
                try:
                    self.start()
                except Exception as e:  # noqa: BLE001 - no engine, no image, no worker
                    self.stop()
                    self.baseline = None
                    start_errors.append(f"{type(e).__name__}: {e}")
                    continue
            try:
                self._request(header, code, test)
                r = self._recv(time.monotonic() + timeout + lim.grace)
            except WorkerBroken as e:
                broke.append(str(e))
                self.stop()
                self.baseline = None
                continue
            status = r.get("status")
            if r.get("restart") or not r.get("clean") or r.get("procs") != self.baseline or status not in STATUSES:
                self.stop()  # something survived or broke: the next job gets a fresh worker
                self.baseline = None
            if status == "sandbox_error" and r.get("restart") and not broke:
                broke.append(r.get("stderr", "")[-300:])
                continue
            return ExecResult(
                status if status in STATUSES else "sandbox_error",
                r.get("returncode"),
                r.get("stdout", ""),
                r.get("stderr", ""),
                float(r.get("seconds", 0.0)),
                backend,
            )
        if len(broke) >= 2 and self._canary_ok(header):
            return ExecResult(
                "failed",
                None,
                "",
                "sandbox: the worker broke twice while this program ran, in fresh "
                f"workers, and a canary program ran fine ({'; '.join(broke)}); counted as failed",
                time.monotonic() - t0,
                backend,
            )
        if len(broke) >= 2:
            start_errors.append(f"the worker broke twice ({'; '.join(broke)}) and so did a canary program")
        return sandbox_error(
            f"sandbox: could not start a worker: {'; '.join(start_errors)}", backend, time.monotonic() - t0
        )

    def _canary_ok(self, header: dict) -> bool:
        """After two breaks: does a trivial program run in a fresh worker?  If so, the program
        broke the worker (failed); if not, the infrastructure did (sandbox_error)."""
        try:
            self.start()
            self._request(header, "pass\n", "")
            ok = self._recv(time.monotonic() + header["timeout"] + self.pool.limits.grace).get("status") == "passed"
        except Exception:  # noqa: BLE001
            ok = False
        if not ok:
            self.stop()
            self.baseline = None
        return ok


LOCAL_UID_BASE = 61000  # local-unsafe as root: slot i runs its programs as uid 61000 + i (no passwd entry)
UNSHARE = ["unshare", "--pid", "--fork", "--mount-proc", "--net", "--ipc", "--kill-child"]
_UNSHARE_OK: list[bool] = []


def _unshare_works() -> bool:
    if not _UNSHARE_OK:
        try:
            ok = (
                shutil.which("unshare") is not None
                and subprocess.run([*UNSHARE, "true"], capture_output=True, timeout=10).returncode == 0
            )
        except (OSError, subprocess.SubprocessError):
            ok = False
        _UNSHARE_OK.append(ok)
    return _UNSHARE_OK[0]


def _remove_quietly(container) -> None:
    try:
        container.remove(force=True)
    except Exception:  # noqa: BLE001 - already gone
        pass
