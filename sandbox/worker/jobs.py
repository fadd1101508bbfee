"""W, the job loop: starts Z and B, hands each job's descriptors to them, enforces the wall
clock and the output cap, kills every other process after each job, wipes the scratch folder,
and turns what it saw into a status (never trusting a program's word for a pass).
"""

import ctypes
import json
import marshal
import os
import select
import signal
import socket
import struct
import time

from .plumbing import PR_SET_CHILD_SUBREAPER, PR_SET_DUMPABLE, PTRACE_CONT, PTRACE_SEIZE, _libc, write_all
from .program import zygote
from .runner import TestRunner


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
        self.lim = dict(
            timeout=1,
            mem_mb=mem_mb,
            fsize_mb=fsize_mb,
            scratch=scratch,
            drop_uid=drop_uid,
            nproc=64 if mode == "local" and drop_uid is not None else None,
        )
        _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        if mode == "container" and self.me != 1:
            # docker-init (PID 1) runs as our uid and is dumpable: be its tracer, so that no
            # program can ptrace it and live on in it between jobs (a process has one tracer)
            self.traces_init = _libc.ptrace(PTRACE_SEIZE, 1, None, None) == 0
        self.oom_file = next(
            (
                p
                for p in ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")
                if mode == "container" and os.access(p, os.R_OK)
            ),
            None,
        )
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
            fields = stat[stat.rfind(b")") + 2 :].split()
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
        status, rc, note = self.verdict(
            job.event, job.z_ok, test, job.verdict, job.nonce, job.arep, job.astatus, job.oom0
        )
        if test and not job.verdict and status == "failed" and job.z_ok:
            note = "the test runner was killed during the test; counted as failed"
        out, err = (bytes(job.outs[fd]) for fd in (job.out_r, job.err_r))
        err += b"\nsandbox: " + note.encode() if note else b""
        return dict(
            status=status,
            returncode=rc,
            seconds=round(job.seconds, 6),
            output_bytes=job.total,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            procs=job.procs,
            clean=job.clean,
            restart=not job.z_ok or job.event in ("runner_dead", "spawn_failed") or not job.wiped,
        )

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
                socket.send_fds(
                    self.bsock, [json.dumps({"nonce": job.nonce}).encode()], [req_w, resp_r, out_w, err_w, test_r]
                )
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
