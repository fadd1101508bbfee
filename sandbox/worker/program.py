"""The untrusted side. Z, the zygote, forks before any job data exists and then only forks A,
one per job; A runs the program's code and then serves the test runner's calls to its functions,
answering only with plain values (values.py).
"""

import gc
import json
import linecache
import marshal
import os
import resource
import select
import socket
import struct
import sys
import traceback
import types

from .plumbing import PR_SET_DUMPABLE, _libc, confine, flush_stdio, install_fds, read_to_eof, recv_frame, send_frame
from .values import encode


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
