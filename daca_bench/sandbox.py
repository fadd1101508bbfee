"""Code sandbox: a pool of long-lived, locked-down Docker containers that run untrusted programs.

Each container (no network, memory and pids limits, read-only root, small tmpfs /tmp, no
capabilities, no-new-privileges, user 10001, docker-init) runs sandbox/worker.py, which
executes one program at a time in freshly forked processes with a wall-clock timeout, a CPU
limit, an output cap, kills every leftover process afterwards and reports.  A pass is proven
by the worker (see sandbox/README.md), never inferred from an exit code or printed text.
After each program the client checks the container (process count against its baseline,
liveness, an HMAC on every reply) and replaces it if anything survived or broke.  Docker unreachable raises
SandboxUnavailable; the less isolated local backend runs only when DACA_BENCH_SANDBOX=local-unsafe.

Try it:
  python -m daca_bench sandbox build        # once: debootstrap image, tagged by recipe hash
  python -m daca_bench sandbox selftest     # hostile programs against the live pool
  python -c "from daca_bench.sandbox import run_tests; print(run_tests('def f(x): return x+1', 'assert f(1) == 2'))"
"""
from __future__ import annotations

import atexit
import base64
import hashlib
import hmac
import json
import os
import queue
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

SANDBOX_DIR = Path(__file__).resolve().parent.parent / "sandbox"
IMAGE_REPO = "daca-bench-sandbox"
RECIPE_FILES = ("build_rootfs.sh", "Dockerfile")
# no SysV IPC objects or POSIX message queues: nothing a program could leave for the next one
NO_IPC = {"kernel.msgmni": "0", "kernel.shmall": "0", "kernel.shmmax": "0", "kernel.sem": "0 0 0 0",
          "kernel.shm_rmid_forced": "1", "fs.mqueue.queues_max": "0"}
STATUSES = ("passed", "failed", "timeout", "memory", "output_limit", "sandbox_error")
HOW_TO_START = ("Start it with `sudo scripts/setup_docker.sh` (installs docker.io, starts dockerd, builds the "
                "sandbox image) or `dockerd > /tmp/dockerd.log 2>&1 &`. A less isolated backend runs only "
                "if you choose it: DACA_BENCH_SANDBOX=local-unsafe.")


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


class _Broken(Exception):
    """The worker or its container died, hung or spoke nonsense."""


def _sandbox_error(msg: str, backend: str, seconds: float = 0.0) -> ExecResult:
    return ExecResult("sandbox_error", None, "", msg, seconds, backend)


# ---------------------------------------------------------------- image recipe
def recipe_hash() -> str:
    h = hashlib.sha256()
    for name in RECIPE_FILES:
        h.update(name.encode() + b"\0" + (SANDBOX_DIR / name).read_bytes() + b"\0")
    return h.hexdigest()[:12]


def image_tag() -> str:
    return os.environ.get("DACA_BENCH_SANDBOX_IMAGE") or f"{IMAGE_REPO}:{recipe_hash()}"


def apt_source() -> tuple[str, str]:
    """(suite, mirror URI) of this machine's main apt source, read at run time."""
    suite = os.environ.get("DACA_BENCH_SANDBOX_SUITE")
    if not suite:
        release = dict(line.strip().split("=", 1) for line in Path("/etc/os-release").read_text().splitlines() if "=" in line)
        suite = release.get("VERSION_CODENAME", "").strip('"')
    if os.environ.get("DACA_BENCH_SANDBOX_MIRROR"):
        return suite, os.environ["DACA_BENCH_SANDBOX_MIRROR"]
    files = [Path("/etc/apt/sources.list")] + sorted(Path("/etc/apt/sources.list.d").glob("*"))
    for path in files:
        if not path.is_file() or path.suffix not in (".list", ".sources"):
            continue
        text = path.read_text(errors="replace")
        if path.suffix == ".list":
            for line in text.splitlines():
                parts = [p for p in line.split("#")[0].split() if not p.startswith("[")]
                if len(parts) >= 3 and parts[0] == "deb" and parts[2] == suite:
                    return suite, parts[1]
        else:
            for stanza in text.split("\n\n"):
                fields = {}
                for line in stanza.splitlines():
                    if ":" in line and not line.startswith(("#", " ")):
                        k, v = line.split(":", 1)
                        fields[k.strip().lower()] = v.split()
                if "deb" in fields.get("types", []) and suite in fields.get("suites", []) and fields.get("uris"):
                    return suite, fields["uris"][0]
    raise SandboxUnavailable(f"no apt source for suite {suite!r} in /etc/apt; set DACA_BENCH_SANDBOX_MIRROR")


def build(force: bool = False, method: str = "auto") -> str:
    """Build (or reuse) the sandbox image for the current recipe; return its tag."""
    client, tag = _docker(), image_tag()
    if not force and _image_exists(client, tag):
        print(f"sandbox image {tag} is up to date (recipe hash); --force rebuilds it", file=sys.stderr)
        return tag
    if method == "auto":
        method = "debootstrap" if os.geteuid() == 0 and shutil.which("debootstrap") else "dockerfile"
    if method == "debootstrap":
        suite, mirror = apt_source()
        cmd = ["bash", str(SANDBOX_DIR / "build_rootfs.sh"), suite, mirror, tag]
    else:
        cmd = ["docker", "build", "-t", tag, "-f", str(SANDBOX_DIR / "Dockerfile"), str(SANDBOX_DIR)]
    print(f"building {tag} ({method}): {' '.join(cmd)}", file=sys.stderr)
    subprocess.run(cmd, check=True)
    return tag


def _image_exists(client, tag: str) -> bool:
    import docker

    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def _docker():
    try:
        import docker
    except ImportError as e:
        raise SandboxUnavailable(f"the docker Python package is missing ({e}); pip install docker") from e
    try:
        client = docker.from_env(timeout=60)
        client.ping()
        return client
    except Exception as e:  # noqa: BLE001 - any failure here means "no engine"
        where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        raise SandboxUnavailable(f"Docker engine not reachable at {where}: {e}. {HOW_TO_START}") from e


# ---------------------------------------------------------------- one worker (container or local process)
def _mac(key: bytes, kind: bytes, seq: int, *parts: bytes) -> bytes:
    head = struct.pack(">cQ", kind, seq) + b"".join(struct.pack(">Q", len(p)) for p in parts)
    return hmac.new(key, head + b"".join(parts), hashlib.sha256).digest()


class _Slot:
    """One worker: started, asked to run jobs, checked after each, replaced when broken."""

    def __init__(self, pool: "Pool", index: int):
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
            raise _Broken(f"cannot write to the worker: {e}") from e

    def _read_some(self, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _Broken("the worker did not answer in time")
        fd = self.sock.fileno() if self.sock is not None else self.proc.stdout.fileno()
        if not select.select([fd], [], [], left)[0]:
            raise _Broken("the worker did not answer in time")
        data = os.read(fd, 1 << 20) if self.sock is None else self.sock.recv(1 << 20)
        if not data:
            raise _Broken("the worker's stream closed (worker or container died)")
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
        if not hmac.compare_digest(tag, _mac(self.key, b"R", self.seq, payload)):
            raise _Broken("a reply without the worker's key (forged by a program, or corrupted)")
        try:
            return json.loads(payload)
        except ValueError as e:
            raise _Broken(f"unreadable reply from the worker: {e}") from e

    def _request(self, header: dict, code: str, test: str) -> None:
        self.seq += 1
        parts = [json.dumps(header).encode(), code.encode("utf-8", "surrogatepass"), test.encode("utf-8", "surrogatepass")]
        parts.append(_mac(self.key, b"Q", self.seq, *parts))
        self._send(b"".join(base64.b64encode(p) + b"\n" for p in parts))

    # -- life cycle
    def start(self) -> None:
        self.buf.clear()
        self.raw.clear()
        src = (SANDBOX_DIR / "worker.py").read_text()
        if self.pool.backend == "docker":
            self._start_container(src)
        else:
            self.scratch = tempfile.mkdtemp(prefix="daca-sandbox-local-")
            lim = self.pool.limits
            cmd = [sys.executable, "-I", "-B", "-c", src, "--mode", "local", "--scratch", self.scratch,
                   "--mem-mb", str(lim.mem_mb), "--fsize-mb", str(lim.fsize_mb)]
            if os.geteuid() == 0:  # programs run unprivileged, in their own PID, network and IPC namespaces
                cmd += ["--drop-uid", str(LOCAL_UID_BASE + self.index)]  # one uid per slot: RLIMIT_NPROC is per uid
                if _unshare_works():
                    cmd = [*UNSHARE, *cmd]
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.key, self.seq = os.urandom(32), 0
        self._send(base64.b64encode(self.key) + b"\n")
        ready = self._recv(time.monotonic() + 60)
        if not ready.get("ready"):
            raise _Broken(f"worker did not announce itself: {ready}")
        self.baseline = ready["baseline"]
        self.isolated = bool(ready.get("isolated"))

    def _start_container(self, src: str) -> None:
        lim, client = self.pool.limits, self.pool.client
        self.container = client.containers.create(
            self.pool.image,
            command=["python3", "-I", "-B", "-c", src, "--mode", "container", "--scratch", "/tmp",
                     "--mem-mb", str(lim.mem_mb), "--fsize-mb", str(lim.fsize_mb)],
            name=f"daca-sbx-{os.getpid()}-{self.index}-{int(time.time() * 1000) % 10**8}",
            labels={"daca-bench.sandbox": "1", "daca-bench.owner": f"{socket.gethostname()}:{os.getpid()}"},
            user="10001:10001", working_dir="/", environment={}, init=True,
            network_mode="none", ipc_mode="none", read_only=True,
            tmpfs={"/tmp": f"rw,nosuid,nodev,noexec,size={lim.tmp_mb}m,nr_inodes=4096,mode=1777"},
            sysctls=NO_IPC,
            mem_limit=f"{lim.container_mem_mb}m", memswap_limit=f"{lim.container_mem_mb}m",
            pids_limit=lim.pids, cap_drop=["ALL"], security_opt=["no-new-privileges"],
            stdin_open=True, tty=False, detach=True, log_config={"type": "none", "config": {}},
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
            except _Broken as e:
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
            return ExecResult(status if status in STATUSES else "sandbox_error", r.get("returncode"),
                              r.get("stdout", ""), r.get("stderr", ""), float(r.get("seconds", 0.0)), backend)
        if len(broke) >= 2 and self._canary_ok(header):
            return ExecResult("failed", None, "", "sandbox: the worker broke twice while this program ran, in fresh "
                              f"workers, and a canary program ran fine ({'; '.join(broke)}); counted as failed",
                              time.monotonic() - t0, backend)
        if len(broke) >= 2:
            start_errors.append(f"the worker broke twice ({'; '.join(broke)}) and so did a canary program")
        return _sandbox_error(f"sandbox: could not start a worker: {'; '.join(start_errors)}", backend,
                              time.monotonic() - t0)

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
            ok = shutil.which("unshare") is not None and subprocess.run(
                [*UNSHARE, "true"], capture_output=True, timeout=10).returncode == 0
        except (OSError, subprocess.SubprocessError):
            ok = False
        _UNSHARE_OK.append(ok)
    return _UNSHARE_OK[0]


def _remove_quietly(container) -> None:
    try:
        container.remove(force=True)
    except Exception:  # noqa: BLE001 - already gone
        pass


# ---------------------------------------------------------------- the pool
class Pool:
    """Long-lived workers; run() and run_batch() are thread-safe; results keep job order."""

    def __init__(self, size: int | None = None, backend: str | None = None, limits: Limits | None = None,
                 image: str | None = None):
        backend = backend or os.environ.get("DACA_BENCH_SANDBOX", "docker") or "docker"
        if backend not in ("docker", "local-unsafe"):
            raise ValueError(f"unknown sandbox backend {backend!r}: use 'docker' or, explicitly, 'local-unsafe'")
        self.backend, self.limits = backend, limits or Limits()
        # one more worker than cores: while one waits on a pipe, the others keep the cores busy
        self.size = size or int(os.environ.get("DACA_BENCH_SANDBOX_WORKERS", 0)) or (os.cpu_count() or 2) + 1
        self.client = self.image = None
        if backend == "docker":
            self.client, self.image = _docker(), image or image_tag()
            if not _image_exists(self.client, self.image):
                raise SandboxUnavailable(f"sandbox image {self.image} is not built: run `python -m daca_bench sandbox "
                                         "build` (or scripts/setup_docker.sh)")
            _prune_stale(self.client)
        self.slots = [_Slot(self, i) for i in range(self.size)]
        self.free: queue.Queue[_Slot] = queue.Queue()
        self.closed = False
        with ThreadPoolExecutor(self.size) as ex:  # start the workers in parallel
            for slot, err in zip(self.slots, ex.map(_try_start, self.slots)):
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

    def run_batch(self, jobs: list[tuple[str, str]], timeout: float = 5.0, workers: int | None = None) -> list[ExecResult]:
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


def _try_start(slot: _Slot):
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


# ---------------------------------------------------------------- CLI hooks
def hostile_cases() -> list[dict]:
    """The hostile programs of sandbox/hostile.py (name, code, test, expected statuses, route)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("daca_sandbox_hostile", SANDBOX_DIR / "hostile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CASES


def configure(parser) -> None:
    sub = parser.add_subparsers(dest="sandbox_command", metavar="ACTION", required=True)
    b = sub.add_parser("build", help="build the sandbox image (reused when the recipe hash is unchanged)")
    b.add_argument("--force", action="store_true", help="rebuild even if an image of this recipe exists")
    b.add_argument("--method", choices=("auto", "debootstrap", "dockerfile"), default="auto",
                   help="debootstrap from the apt mirror (root, default) or sandbox/Dockerfile (needs a registry)")
    r = sub.add_parser("run", help="run a program file in the sandbox and print the JSON result")
    r.add_argument("file")
    r.add_argument("--timeout", type=float, default=5.0)
    r.add_argument("--test", help="file with test code to run after the program")
    sub.add_parser("selftest", help="run the hostile programs against the live pool and print a table")


def run(args) -> int:
    try:
        if args.sandbox_command == "build":
            print(build(force=args.force, method=args.method))
            return 0
        if args.sandbox_command == "run":
            test = Path(args.test).read_text() if args.test else ""
            res = get_pool(size=1).run(Path(args.file).read_text(), test, args.timeout)
            print(json.dumps(asdict(res), indent=2))
            return 0 if res.passed else 1
        return _selftest()
    except SandboxUnavailable as e:
        print(f"daca-bench sandbox: {e}", file=sys.stderr)
        return 3


def _selftest() -> int:
    pool = get_pool()
    cases = hostile_cases()
    if pool.backend == "local-unsafe" and not all(s.isolated for s in pool.slots):
        print("local-unsafe backend without its own PID namespace (not root?): skipping "
              + ", ".join(c["name"] for c in cases if c["host_danger"]), file=sys.stderr)
        cases = [c for c in cases if not c["host_danger"]]
    t0 = time.monotonic()
    results = pool.run_batch([(c["code"], c["test"]) for c in cases], timeout=3.0)
    rows = [(c["name"], "|".join(c["expected"]), r.status, r.status in c["expected"]) for c, r in zip(cases, results)]
    width = max(len(r[0]) for r in rows)
    print(f"{'program':<{width}}  {'expected':<22} {'got':<13} ok")
    for name, exp, got, ok in rows:
        print(f"{name:<{width}}  {exp:<22} {got:<13} {'ok' if ok else 'FAIL'}")
    bad = sum(not r[3] for r in rows)
    print(f"\n{len(rows) - bad}/{len(rows)} as expected in {time.monotonic() - t0:.1f}s, backend {pool.backend}")
    return 1 if bad else 0
