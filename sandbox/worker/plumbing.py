"""Worker plumbing shared by W, Z, A and B: libc calls, length-prefixed frames on descriptors,
descriptor layouts, and the confinement (rlimits, uid, stdio, environment) a forked process
applies to itself before it touches any job.
"""

import ctypes
import fcntl
import os
import resource
import signal
import struct
import sys

_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 1, 4, 36
PTRACE_CONT, PTRACE_SEIZE = 7, 0x4206
_libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
MAX_FRAME = 64 << 20


# ---------------------------------------------------------------- plumbing
def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


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
    sys.stdin = open(0, closefd=False)
    sys.stdout = open(1, "w", closefd=False, buffering=1 << 16)
    sys.stderr = open(2, "w", closefd=False, buffering=1)
    os.environ.clear()
    os.environ.update(HOME=lim["scratch"], TMPDIR=lim["scratch"], PATH="/usr/local/bin:/usr/bin:/bin", LANG="C.UTF-8")
    os.chdir(lim["scratch"])


def set_limits(lim, program):
    """Once per Z and per B; hard == soft, so no program can raise them again (A adds RLIMIT_CPU)."""
    mb = 1 << 20
    wanted = {
        resource.RLIMIT_AS: lim["mem_mb"] * mb,
        resource.RLIMIT_FSIZE: lim["fsize_mb"] * mb,
        resource.RLIMIT_CORE: 0,
        resource.RLIMIT_MSGQUEUE: 0,
    }
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
