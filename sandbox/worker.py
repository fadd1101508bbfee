"""Sandbox worker: runs untrusted programs one at a time, each in a freshly forked process.

Runs inside every pool container (under docker-init, as user 10001) or, for the explicitly
chosen local-unsafe backend, as a host subprocess; the client passes this file with
`python3 -I -B -c`.  Control stream: the client's first stdin line is an HMAC key; each
request is four base64 lines (JSON header, code, test, HMAC), so the stream never holds
Docker's detach-key sequence; each reply is a frame (4-byte length, JSON, HMAC), the first
one "ready".  Programs can reach these pipes through docker-init's /proc/1/fd, hence the key.

Processes, so that a pass is proven and not claimed (sandbox/README.md lists the routes):
  W  this loop: enforces the wall clock and the output cap, kills every other process after
     each job, wipes /tmp, reports.  Non-dumpable (/proc/W/{mem,fd} are closed), and the
     ptrace tracer of docker-init, so that no program can trace that one.
  Z  the zygote, forked before any job data exists; it only forks A, so no program's memory
     holds another job's code, test or output.
  A  the program, forked from Z per job: runs `code`, then serves calls to its functions;
     values leave A only as tagged JSON, so only plain builtin values reach the test.
  B  the test runner, forked from W (non-dumpable, long-lived): runs the trusted `test` with
     proxies for A's functions and, only when the test code returned, sends W "PASS" + the
     job's nonce over a socket no program process holds.

Try it: python -m daca_bench sandbox selftest   (DACA_BENCH_SANDBOX=local-unsafe: no Docker)
"""
import base64
import builtins
import ctypes
import fcntl
import gc
import hashlib
import hmac
import importlib
import json
import linecache
import marshal
import os
import resource
import select
import signal
import socket
import struct
import sys
import time
import traceback
import types

PRELOAD = ("math", "re", "collections", "itertools", "functools", "heapq", "bisect", "string", "random",
           "typing", "hashlib", "fractions", "decimal", "statistics", "copy", "operator", "json")
NO_IMPORT = {"antigravity", "this", "__hello__", "__phello__", "idlelib", "tkinter", "turtle", "turtledemo",
             "webbrowser", "pydoc", "site", "code", "pdb", "ensurepip", "venv"}  # side effects on import
_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 1, 4, 36
PTRACE_CONT, PTRACE_SEIZE = 7, 0x4206
_libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
MAX_FRAME = 64 << 20


# ---------------------------------------------------------------- plumbing
def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def read_exact(fd, n):
    chunks = []
    while n:
        b = os.read(fd, min(n, 1 << 20))
        if not b:
            return None
        chunks.append(b)
        n -= len(b)
    return b"".join(chunks)


def send_frame(fd, payload):
    write_all(fd, struct.pack(">I", len(payload)) + payload)


def recv_frame(fd):
    head = read_exact(fd, 4)
    if head is None:
        return None
    (n,) = struct.unpack(">I", head)
    if n > MAX_FRAME:
        raise ValueError(f"a frame of {n} bytes is over the limit")
    return read_exact(fd, n)


def read_to_eof(fd, text=True):
    data = b"".join(iter(lambda: os.read(fd, 1 << 20), b""))
    os.close(fd)
    return data.decode("utf-8", "replace") if text else data


def install_fds(wanted):
    """Make wanted[i] descriptor i and close every other descriptor."""
    tmp = [fcntl.fcntl(fd, fcntl.F_DUPFD, 512) for fd in wanted]
    for i, fd in enumerate(tmp):
        os.dup2(fd, i)
    os.closerange(len(wanted), 1 << 16)


def confine(lim, program):
    """Once per Z (for all its programs) or per B: rlimits, OOM preference, uid, stdio, env."""
    try:
        os.setpgid(0, 0)
    except OSError:
        pass
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    set_limits(lim, program)
    if program:  # the kernel's OOM killer takes Z and its programs first, never W or B
        _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # (non-dumpable: /proc/self is root's)
        try:
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("1000")
        except OSError:
            pass
    if lim.get("drop_uid") is not None and os.geteuid() == 0:
        os.setgroups([])
        os.setgid(lim["drop_uid"])
        os.setuid(lim["drop_uid"])
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the protocol stream is W's alone
        os.dup2(null, fd)
    os.close(null)
    sys.stdin = open(0, "r", closefd=False)
    sys.stdout = open(1, "w", closefd=False, buffering=1 << 16)
    sys.stderr = open(2, "w", closefd=False, buffering=1)
    os.environ.clear()
    os.environ.update(HOME=lim["scratch"], TMPDIR=lim["scratch"], PATH="/usr/local/bin:/usr/bin:/bin", LANG="C.UTF-8")
    os.chdir(lim["scratch"])


def set_limits(lim, program):
    """Once per Z and per B; hard == soft, so no program can raise them again (A adds RLIMIT_CPU)."""
    mb = 1 << 20
    wanted = {resource.RLIMIT_AS: lim["mem_mb"] * mb, resource.RLIMIT_FSIZE: lim["fsize_mb"] * mb,
              resource.RLIMIT_CORE: 0, resource.RLIMIT_MSGQUEUE: 0}
    if program and lim.get("nproc"):  # local backend: no pids cgroup there
        wanted[resource.RLIMIT_NPROC] = lim["nproc"]
    for res, value in wanted.items():
        try:
            resource.setrlimit(res, (value, value))
        except (ValueError, OSError):
            pass


def flush_stdio():
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except BaseException:
            pass


# ---------------------------------------------------------------- plain values as tagged JSON
def encode(v, depth=0):
    """JSON text of a plain builtin value; ValueError/TypeError for anything else."""
    return json.dumps(_enc(v, depth), allow_nan=True)


def _enc(v, depth):
    t = type(v)
    if v is None or t is str or t is int or t is bool or t is float:
        return v
    if depth > 400:
        raise ValueError("value nested too deeply")
    if t is list:
        return [_enc(x, depth + 1) for x in v]
    if t is dict:
        return {"t": "dict", "v": [[_enc(k, depth + 1), _enc(x, depth + 1)] for k, x in v.items()]}
    if t in (tuple, set, frozenset):
        return {"t": t.__name__, "v": [_enc(x, depth + 1) for x in v]}
    if t is bytes:
        return {"t": "bytes", "v": v.hex()}
    if t is complex:
        return {"t": "complex", "v": [v.real, v.imag]}
    raise TypeError(f"a {t.__name__} is not a plain builtin value")


def _dec_hook(obj):
    if len(obj) != 2 or type(obj.get("v")) not in (list, str):
        raise ValueError("malformed value")
    t, v = obj.get("t"), obj["v"]
    if t == "tuple":
        return tuple(v)
    if t in ("set", "frozenset"):
        return (set if t == "set" else frozenset)(v)
    if t == "dict" and all(type(p) is list and len(p) == 2 for p in v):
        return {k: x for k, x in v}
    if t == "bytes" and type(v) is str:
        return bytes.fromhex(v)
    if t == "complex" and len(v) == 2 and all(type(x) in (int, float) for x in v):
        return complex(*v)
    raise ValueError("malformed value")


def decode(text):
    """The only way data from a program reaches the test: json's parser plus exact builtin types."""
    return json.loads(text, object_hook=_dec_hook)


# ---------------------------------------------------------------- A: the program (forked from Z)
def program_child(msg, fds, main):
    """A: Z applied everything shared; per program only its group, CPU limit and descriptors."""
    code_r, out_w, err_w, req_r, resp_w, arep_w = fds
    try:
        os.setpgid(0, 0)
        lim = json.loads(msg)
        cpu = int(lim["timeout"]) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # its own /proc/self works as usual
        blob = read_to_eof(code_r, text=False)  # the source, then W's compilation of it (or nothing)
        (n,) = struct.unpack(">I", blob[:4])
        src, compiled = blob[4 : 4 + n].decode("utf-8", "replace"), blob[4 + n :]
        install_fds([0, out_w, err_w, req_r, resp_w, arep_w])
        sys.modules["__main__"] = main
    except BaseException:
        os._exit(70)
    verdict = b"ok"
    try:
        exec(marshal.loads(compiled) if compiled else compile(src, "<program>", "exec"), main.__dict__)
    except SystemExit as e:
        print(f"sandbox: SystemExit({e.code!r}) before the test ran; that is never a pass", file=sys.stderr)
        verdict = b"exit"
    except BaseException as e:
        show_traceback(e, src)
        verdict = b"memory" if isinstance(e, MemoryError) else b"error"
    flush_stdio()
    try:
        os.write(5, verdict)
    except OSError:
        pass
    if verdict == b"ok" and lim["serve"]:
        serve(main.__dict__, 3, 4, src)
        flush_stdio()
    os._exit(0 if verdict == b"ok" else 1)


def show_traceback(e, src):
    """The traceback without the harness frame, with the program's source lines."""
    try:
        linecache.cache["<program>"] = (len(src), None, src.splitlines(True), "<program>")
        traceback.print_exception(type(e), e, e.__traceback__.tb_next)
    except BaseException:
        pass


def serve(ns, req, resp, src):
    """Send B the program's names, then answer B's calls until B hangs up."""
    exports = {}
    for name, value in list(ns.items()):
        if isinstance(value, types.ModuleType):
            exports[name] = ["module", value.__name__]
        elif callable(value):
            exports[name] = ["call", None]
        else:
            try:
                exports[name] = ["value", encode(value)]
            except (ValueError, TypeError, RecursionError):
                pass
    send_frame(resp, json.dumps(exports).encode())
    while (msg := recv_frame(req)) is not None:
        name, args, kwargs = marshal.loads(msg)  # from B, the trusted side
        try:
            result = ns[name](*args, **kwargs)
            try:
                out = "R" + encode(result)
            except (ValueError, TypeError, RecursionError) as e:
                out = "E" + json.dumps(["TypeError", f"sandbox: {name}() returned no plain value: {e}"])
        except BaseException as e:  # noqa: BLE001 - every exception goes back to the test
            show_traceback(e, src)
            try:
                text = str(e)[:2000]
            except BaseException:
                text = "<unprintable>"
            out = "E" + json.dumps([type(e).__name__, text])
        flush_stdio()
        send_frame(resp, out.encode("utf-8", "surrogatepass"))


# ---------------------------------------------------------------- B: the test runner (forked from W)
class SandboxBroken(BaseException):
    """The program ended, hung up or answered something that is not a plain value."""


class ProgramError(Exception):
    """An exception the program raised whose type is not a builtin Exception class."""


class TestRunner:
    def __init__(self, sock, lim):
        self.sock, self.lim, self.broken = sock, lim, []

    def loop(self):
        confine(self.lim, program=False)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a program's SIGINT must not raise inside the test
        install_fds([0, 1, 2, self.sock.detach(), 1])
        self.sock = socket.socket(fileno=3)
        while True:
            msg, fds, _, _ = socket.recv_fds(self.sock, 1 << 16, 8)
            if not msg:
                os._exit(0)
            nonce = json.loads(msg)["nonce"]
            req, resp, out_w, err_w, test_r = fds
            for fd, target in ((out_w, 1), (err_w, 2)):
                os.dup2(fd, target)
                os.close(fd)
            verdict = self.run_test(read_to_eof(test_r), req, resp, nonce)
            flush_stdio()
            for fd in (req, resp):
                os.close(fd)
            os.dup2(4, 1)  # let go of this job's output pipes
            os.dup2(4, 2)
            self.sock.send(verdict.encode())

    def run_test(self, test_src, req, resp, nonce):
        self.broken = []
        try:
            exports = recv_frame(resp)
            if exports is None:
                raise SandboxBroken("the program ended before its top level finished")
            ns = self.namespace(json.loads(exports), req, resp)
            linecache.cache["<test>"] = (len(test_src), None, test_src.splitlines(True), "<test>")
            exec(compile(test_src, "<test>", "exec"), ns)
            if self.broken:
                raise SandboxBroken(self.broken[0])
            return "PASS" + nonce
        except BaseException as e:  # noqa: BLE001
            if isinstance(e, SandboxBroken) or self.broken:
                print(f"sandbox: {(self.broken or [str(e)])[0]}", file=sys.stderr)
            else:  # the traceback without this harness frame
                traceback.print_exception(type(e), e, e.__traceback__.tb_next)
            return "FAIL:" + type(e).__name__

    def namespace(self, exports, req, resp):
        ns = {"__name__": "__main__", "__builtins__": builtins}
        for name, entry in (exports.items() if type(exports) is dict else ()):
            # never let the program shadow a builtin or a dunder name in the test's globals
            if not name.isidentifier() or name.startswith("__") or hasattr(builtins, name):
                continue
            if type(entry) is not list or len(entry) != 2:
                continue
            kind, payload = entry
            try:
                if kind == "call":
                    ns[name] = self.proxy(name, req, resp)
                elif kind == "module" and type(payload) is str and (payload in sys.modules or (
                        payload.split(".")[0] in sys.stdlib_module_names and payload.split(".")[0] not in NO_IMPORT)):
                    ns[name] = importlib.import_module(payload)
                elif kind == "value" and type(payload) is str:
                    ns[name] = decode(payload)
            except Exception:  # noqa: BLE001 - a name the test cannot have
                pass
        return ns

    def broke(self, why):
        self.broken.append(why)
        raise SandboxBroken(why)

    def proxy(self, name, req, resp):
        def call(*args, **kwargs):
            try:
                payload = marshal.dumps((name, args, kwargs))
                _enc([args, kwargs], 0)  # plain values only, as on the way back
            except (ValueError, TypeError) as e:
                self.broke(f"the test passed {name}() a value that cannot cross to the program: {e}")
            send_frame(req, payload)
            try:
                answer = recv_frame(resp)
            except (OSError, ValueError) as e:
                self.broke(f"bad answer from the program during {name}(): {e}")
            if answer is None:
                self.broke(f"the program process ended during {name}()")
            try:
                value = decode(answer[1:].decode("utf-8", "surrogatepass"))
            except (ValueError, TypeError, RecursionError) as e:
                self.broke(f"{name}() answered something that is not plain data: {e}")
            if answer[:1] == b"R":
                return value
            if answer[:1] == b"E" and type(value) is list and len(value) == 2 and all(type(x) is str for x in value):
                cls = getattr(builtins, value[0], None)
                if (isinstance(cls, type) and issubclass(cls, Exception)
                        and not issubclass(cls, (StopIteration, StopAsyncIteration))):
                    raise cls(value[1])
                raise ProgramError(f"{value[0]}: {value[1]}")
            self.broke(f"malformed answer from the program during {name}()")

        call.__name__ = call.__qualname__ = name
        return call


# ---------------------------------------------------------------- Z: the zygote
def zygote(sock, lim):
    """Fork A for each job; report A's pid ("P"), and its exit status ("X") whenever A ends
    (a dying A is reaped while the next one already runs)."""
    confine(lim, program=True)
    main = types.ModuleType("__main__")  # every A gets its own copy of this empty module
    gc.freeze()  # programs' garbage collections never touch (and copy) the inherited heap
    dying = {}  # pidfd -> pid
    while True:
        for fd in select.select([sock, *dying], [], [])[0]:
            if fd is not sock:
                pid = dying.pop(fd)
                os.close(fd)
                sock.send(struct.pack(">cii", b"X", pid, os.waitpid(pid, 0)[1]))
                continue
            msg, fds, _, _ = socket.recv_fds(sock, 1 << 16, 8)
            if not msg:
                os._exit(0)
            try:
                pid = os.fork()
            except OSError as e:  # no pids left (a leftover fork bomb): W replaces the container
                for f in fds:
                    os.close(f)
                sock.send(struct.pack(">cii", b"F", 0, e.errno or 0))
                continue
            if pid == 0:
                sock.close()
                program_child(msg, fds, main)
            for f in fds:
                os.close(f)
            sock.send(struct.pack(">cii", b"P", pid, 0))
            try:
                dying[os.pidfd_open(pid)] = pid
            except OSError:  # no pidfds: wait in line
                sock.send(struct.pack(">cii", b"X", pid, os.waitpid(pid, 0)[1]))


# ---------------------------------------------------------------- W: the job loop
def _wipe(path):
    try:
        entries = list(os.scandir(path))
    except OSError:
        return
    for e in entries:
        try:
            if e.is_dir(follow_symlinks=False):
                os.chmod(e.path, 0o700)  # a program may have chmod-ed its directories away
                _wipe(e.path)
                os.rmdir(e.path)
            else:
                os.unlink(e.path)
        except OSError:
            pass


def program_blob(code):
    """What A reads: the source (for tracebacks) and, compiled here in W, where compiling copies
    no shared pages, its code object.  A compiles itself when W could not (or for huge sources,
    whose compilation must run under A's limits)."""
    compiled = b""
    if len(code) <= 256 << 10:
        try:
            compiled = marshal.dumps(compile(code.decode("utf-8", "replace"), "<program>", "exec"))
        except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError):
            pass
    return struct.pack(">I", len(code)) + code + compiled


class Worker:
    def __init__(self, mode, scratch, drop_uid=None, mem_mb=512, fsize_mb=16):
        self.oom_seen = 0
        self.mode, self.scratch, self.me = mode, scratch, os.getpid()
        self.lim = dict(timeout=1, mem_mb=mem_mb, fsize_mb=fsize_mb, scratch=scratch, drop_uid=drop_uid,
                        nproc=64 if mode == "local" and drop_uid is not None else None)
        _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        if mode == "container" and self.me != 1:
            # docker-init (PID 1) runs as our uid and is dumpable: be its tracer, so that no
            # program can ptrace it and live on in it between jobs (a process has one tracer)
            self.traces_init = _libc.ptrace(PTRACE_SEIZE, 1, None, None) == 0
        self.oom_file = next((p for p in ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")
                              if mode == "container" and os.access(p, os.R_OK)), None)
        self.wipe()
        self.oom_seen = self.oom_kills()
        self.zsock, self.zpid = self.spawn(lambda sock: zygote(sock, dict(self.lim)))
        self.bsock = self.bpid = None
        self.spawn_runner()
        self.reaped = {}

    def spawn(self, target):
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            mine.close()
            for s in (self.__dict__.get("zsock"), self.__dict__.get("bsock")):
                if s is not None:
                    s.close()
            target(theirs)
            os._exit(0)
        theirs.close()
        return mine, pid

    def spawn_runner(self):
        if self.bsock is not None:
            self.bsock.close()
        self.bsock, self.bpid = self.spawn(lambda sock: TestRunner(sock, dict(self.lim)).loop())

    # ---- processes
    def alive(self, known=()):
        """Live pids this worker answers for: the whole container, or its descendants (local).
        Pids in `known` (W, Z, B, init) are taken as alive without reading their stat."""
        procs = {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            if pid in known and self.mode == "container":
                procs[pid] = 0
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2:].split()
            if fields[0] not in (b"Z", b"X"):
                procs[pid] = int(fields[1])
        if self.mode == "local" and self.me != 1:
            mine, grew = {self.me}, True
            while grew:
                grew = False
                for pid, ppid in procs.items():
                    if ppid in mine and pid not in mine:
                        mine.add(pid)
                        grew = True
            procs = {p: v for p, v in procs.items() if p in mine}
        return list(procs)

    def reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == 1 and os.WIFSTOPPED(status):  # docker-init, traced by W: let it go on
                _libc.ptrace(PTRACE_CONT, 1, None, ctypes.c_void_p(os.WSTOPSIG(status)))
                continue
            self.reaped[pid] = status

    def kill_all(self, keep):
        """SIGKILL every process but `keep` until no unsignalled one is left (a fork bomb races
        us; a SIGKILLed process can neither run nor fork again).  Returns (done, signalled)."""
        signalled = set()
        for _ in range(400):
            victims = [p for p in self.alive(keep) if p not in keep and p not in signalled]
            if not victims:
                return True, signalled
            for p in victims:
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
            signalled.update(victims)
            self.reap()
        return False, signalled

    def exit_of(self, apid, limit):
        """A's exit status from Z's next report about it, or None after `limit` seconds."""
        end = time.monotonic() + limit
        while (left := end - time.monotonic()) > 0 and select.select([self.zsock], [], [], left)[0]:
            try:
                kind, pid, status = struct.unpack(">cii", self.zsock.recv(4096))
            except (OSError, struct.error):
                return None
            if kind == b"X" and pid == apid:
                return status
        return None

    def await_gone(self, pids, limit=2.0):
        """Wait until killed processes have left (their pids count against the pids limit)."""
        end = time.monotonic() + limit
        while pids and time.monotonic() < end:
            self.reap()
            pids = pids & set(self.alive())
            if pids:
                time.sleep(0.001)

    def oom_kills(self):
        try:
            with open(self.oom_file) as f:
                return sum(int(line.split()[1]) for line in f if line.startswith("oom_kill "))
        except (OSError, TypeError):
            return 0

    def wipe(self):
        os.makedirs(self.scratch, exist_ok=True)
        if self.mode == "local":
            os.chmod(self.scratch, 0o700)
            if self.lim["drop_uid"] is not None and os.geteuid() == 0:
                os.chown(self.scratch, self.lim["drop_uid"], self.lim["drop_uid"])
        _wipe(self.scratch)

    # ---- one job
    def run_job(self, h, code, test):
        job = Job(h, test)
        job.oom0, self.reaped = self.oom_seen, {}
        self.start(job, code, test)
        job.seconds = self.watch(job) - job.t0
        self.finish(job)
        status, rc, note = self.verdict(job.event, job.z_ok, test, job.verdict, job.nonce, job.arep, job.astatus,
                                        job.oom0)
        if test and not job.verdict and status == "failed" and job.z_ok:
            note = "the test runner was killed during the test; counted as failed"
        out, err = (bytes(job.outs[fd]) for fd in (job.out_r, job.err_r))
        err += b"\nsandbox: " + note.encode() if note else b""
        return dict(status=status, returncode=rc, seconds=round(job.seconds, 6), output_bytes=job.total,
                    stdout=out.decode("utf-8", "replace"), stderr=err.decode("utf-8", "replace"),
                    procs=job.procs, clean=job.clean, restart=not job.z_ok or job.event in ("runner_dead", "spawn_failed") or not job.wiped)

    def start(self, job, code, test):
        """Hand A's descriptors to Z (A reads the code), then B's to B (B reads the test)."""
        (job.out_r, out_w), (job.err_r, err_w), (code_r, code_w) = os.pipe(), os.pipe(), os.pipe()
        (req_r, req_w), (resp_r, resp_w), (job.arep_r, arep_w) = os.pipe(), os.pipe(), os.pipe()
        job.outs = {job.out_r: bytearray(), job.err_r: bytearray()}
        try:
            socket.send_fds(self.zsock, [json.dumps(job.lim).encode()], [code_r, out_w, err_w, req_r, resp_w, arep_w])
        except OSError:
            job.z_ok = False
        for fd in (code_r, req_r, resp_w, arep_w):
            os.close(fd)
        try:
            write_all(code_w, program_blob(code))
        except OSError:
            pass
        os.close(code_w)
        if test and job.z_ok:
            test_r, test_w = os.pipe()
            try:
                socket.send_fds(self.bsock, [json.dumps({"nonce": job.nonce}).encode()],
                                [req_w, resp_r, out_w, err_w, test_r])
                os.close(test_r)
                write_all(test_w, test)
            except OSError:
                job.b_ok, job.event = False, "runner_dead"
            for fd in (test_r, test_w):
                try:
                    os.close(fd)
                except OSError:
                    pass
        for fd in (req_w, resp_r, out_w, err_w):
            os.close(fd)

    def watch(self, job):
        """Until B's verdict (or A's end without a test), the deadline or the output limit."""
        watch = [job.out_r, job.err_r, job.arep_r, self.zsock] + ([self.bsock] if job.test and job.b_ok else [])
        while job.event is None and job.z_ok:
            left = job.deadline - time.monotonic()
            ready = select.select(watch, [], [], left)[0] if left > 0 else []
            if not ready:
                job.event = "timeout"
            for fd in ready:
                if fd is self.zsock:
                    try:
                        kind, pid, status = struct.unpack(">cii", fd.recv(4096))
                    except (OSError, struct.error):  # Z is gone
                        job.z_ok = False
                        break
                    if kind == b"F":
                        job.event = "spawn_failed"
                    job.apid = pid if kind == b"P" else job.apid
                    if kind == b"X" and pid == job.apid:  # (the exits of earlier jobs' A are old news)
                        job.astatus = status
                        job.event = job.event or (None if job.test else "done")
                elif fd is self.bsock:
                    try:
                        job.verdict = fd.recv(4096).decode()
                    except OSError:
                        job.verdict = ""
                    job.b_ok, job.event = bool(job.verdict), "done"
                else:
                    data = os.read(fd, 1 << 16)
                    if not data:
                        watch.remove(fd)
                    if fd == job.arep_r:
                        job.arep += data
                        continue
                    job.total += len(data)
                    job.outs[fd] += data[: max(0, job.cap - len(job.outs[fd]))]
                    if job.total > job.out_limit:
                        job.event = "output_limit"
        return time.monotonic()

    def finish(self, job):
        """Kill everything but W, Z (and a healthy B), drain the output, wipe /tmp, count."""
        if job.test and job.astatus is None and job.verdict.startswith("FAIL:SandboxBroken") and job.z_ok:
            job.astatus = self.exit_of(job.apid, 0.2)  # A died first: how (CPU limit, OOM kill) decides
        job.b_ok = job.b_ok and (not job.test or bool(job.verdict))
        job.clean, signalled = self.kill_all({1, self.me, self.zpid} | ({self.bpid} if job.b_ok else set()))
        self.await_gone(signalled - {job.apid})  # A itself Z reaps while the next job runs
        try:
            os.kill(self.zpid, signal.SIGCONT)  # in case a program stopped it
        except OSError:
            job.z_ok = False
        os.set_blocking(job.arep_r, False)  # A's own report may still sit in its pipe
        try:
            job.arep += os.read(job.arep_r, 64)
        except OSError:
            pass
        for fd, buf in job.outs.items():
            os.set_blocking(fd, False)
            try:
                while len(buf) < job.cap and (data := os.read(fd, 1 << 16)):
                    buf += data[: job.cap - len(buf)]
            except OSError:
                pass
        for fd in (job.out_r, job.err_r, job.arep_r):
            os.close(fd)
        self.reap()
        job.z_ok = job.z_ok and self.zpid not in self.reaped
        if not job.b_ok or self.bpid in self.reaped:
            self.spawn_runner()
        try:
            self.wipe()
        except (OSError, RecursionError):  # e.g. thousands of nested directories: use a fresh container
            job.wiped = False
        self.oom_seen = self.oom_kills()  # (also the next job's baseline)
        job.procs = len(set(self.alive({1, self.me, self.zpid, self.bpid})) - signalled)
        job.clean = job.clean and job.wiped

    def verdict(self, event, z_ok, test, verdict, nonce, arep, astatus, oom0):
        rc = None if astatus is None else os.waitstatus_to_exitcode(astatus)
        if event == "runner_dead":
            return "sandbox_error", None, "the test runner was gone before the job started"
        if event == "spawn_failed":
            return "sandbox_error", None, "the zygote could not fork the program (no pids left)"
        memory = arep == b"memory" or verdict == "FAIL:MemoryError" or self.oom_seen > oom0
        if not z_ok:
            return ("memory" if memory else "failed"), rc, "the program killed or stopped the zygote; counted as failed"
        if event in ("timeout", "output_limit"):
            return event, None, "output over the limit; the program was killed" if event == "output_limit" else None
        if test and verdict == "PASS" + nonce:
            return "passed", 0, None
        if not test and arep == b"ok" and astatus == 0:
            return "passed", 0, None
        if memory:
            return "memory", rc, None
        if astatus is not None and os.WIFSIGNALED(astatus) and os.WTERMSIG(astatus) == signal.SIGXCPU:
            return "timeout", rc, "CPU time limit"
        return "failed", (1 if test else rc), None


class Job:
    """The state of one program run."""

    def __init__(self, h, test):
        self.lim = dict(timeout=float(h["timeout"]), serve=bool(test))
        self.test, self.cap, self.out_limit = test, int(h["output_cap"]), int(h["output_limit"])
        self.t0 = time.monotonic()
        self.deadline = self.t0 + self.lim["timeout"]
        self.nonce = os.urandom(16).hex()  # drawn after Z forked its A: no program holds it
        self.z_ok = self.b_ok = self.wiped = True
        self.event, self.verdict, self.arep, self.astatus, self.apid, self.total = None, "", b"", None, -1, 0


class LineReader:
    def __init__(self, fd):
        self.fd, self.buf = fd, bytearray()

    def line(self):
        while (i := self.buf.find(b"\n")) < 0:
            data = os.read(self.fd, 1 << 20)
            if not data:
                return None
            self.buf += data
        out = bytes(self.buf[:i])
        del self.buf[: i + 1]
        return out


class Channel:
    """The control stream, authenticated both ways with a key that arrives before any program
    exists (programs can reach the container's stdio pipes through /proc/1/fd of docker-init)."""

    def __init__(self, lines):
        self.lines, self.key, self.seq = lines, base64.b64decode(lines.line() or b""), 0

    def mac(self, kind, *parts):
        head = struct.pack(">cQ", kind, self.seq) + b"".join(struct.pack(">Q", len(p)) for p in parts)
        return hmac.new(self.key, head + b"".join(parts), hashlib.sha256).digest()

    def receive(self):
        parts = [self.lines.line() for _ in range(4)]
        if None in parts:
            return None
        h, code, test, tag = (base64.b64decode(p) for p in parts)
        self.seq += 1
        if not hmac.compare_digest(tag, self.mac(b"Q", h, code, test)):
            raise PermissionError("a request without the client's key: someone wrote into the control stream")
        return json.loads(h), code, test

    def reply(self, obj):
        payload = json.dumps(obj).encode()
        send_frame(1, payload + self.mac(b"R", payload))

    def tampered(self):
        """Any byte on stdin while a job ran came from a program, never from the client."""
        return bool(self.lines.buf) or bool(select.select([0], [], [], 0)[0])


def main():
    args = dict(zip(sys.argv[1::2], sys.argv[2::2]))  # --mode M --scratch DIR --mem-mb N --fsize-mb N [--drop-uid N]
    mode, scratch = args.get("--mode", "container"), args.get("--scratch", "/tmp")
    drop = int(args["--drop-uid"]) if "--drop-uid" in args else None
    for name in PRELOAD:
        importlib.import_module(name)
    w = Worker(mode, scratch, drop, int(args.get("--mem-mb", 512)), int(args.get("--fsize-mb", 16)))  # Z and B exist before the key is read: neither ever holds it
    chan = Channel(LineReader(0))
    isolated = mode == "container" or os.getpid() == 1  # an own PID namespace: nothing else to hit
    chan.reply(dict(ready=True, baseline=len(w.alive()), pid=w.me, python=sys.version.split()[0],
                    mode=mode, isolated=isolated, traces_init=getattr(w, "traces_init", False)))
    while True:
        try:
            job = chan.receive()
        except (PermissionError, ValueError) as e:
            chan.reply(dict(status="sandbox_error", returncode=None, seconds=0.0, stdout="", output_bytes=0,
                            stderr=f"sandbox worker: {e}", procs=-1, clean=False, restart=True))
            break
        if job is None:
            break
        h, code, test = job
        try:
            reply = w.run_job(h, code, test)
        except Exception:  # the harness itself broke: say so, never a score
            reply = dict(status="sandbox_error", returncode=None, seconds=0.0, stdout="", output_bytes=0,
                         stderr="sandbox worker error:\n" + traceback.format_exc(), procs=-1, clean=False, restart=True)
        if chan.tampered():
            reply.update(status="failed", returncode=None, restart=True,
                         stderr=reply["stderr"] + "\nsandbox: the program wrote into the worker's control stream; "
                         "counted as failed")
        chan.reply(dict(reply, id=h.get("id")))
        if reply["restart"]:
            break
    os._exit(0)


if __name__ == "__main__":
    main()
