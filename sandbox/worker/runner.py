"""B, the test runner (forked from W, non-dumpable, long-lived): runs the trusted test with
proxies for the program's functions and, only when the test code returned, sends W "PASS" and
the job's nonce over a socket no program process holds.
"""

import builtins
import importlib
import json
import linecache
import marshal
import os
import signal
import socket
import sys
import traceback

from .plumbing import confine, flush_stdio, install_fds, read_to_eof, recv_frame, send_frame
from .values import _enc, decode

NO_IMPORT = {
    "antigravity",
    "this",
    "__hello__",
    "__phello__",
    "idlelib",
    "tkinter",
    "turtle",
    "turtledemo",
    "webbrowser",
    "pydoc",
    "site",
    "code",
    "pdb",
    "ensurepip",
    "venv",
}  # side effects on import


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
        for name, entry in exports.items() if type(exports) is dict else ():
            # never let the program shadow a builtin or a dunder name in the test's globals
            if not name.isidentifier() or name.startswith("__") or hasattr(builtins, name):
                continue
            if type(entry) is not list or len(entry) != 2:
                continue
            kind, payload = entry
            try:
                if kind == "call":
                    ns[name] = self.proxy(name, req, resp)
                elif (
                    kind == "module"
                    and type(payload) is str
                    and (
                        payload in sys.modules
                        or (payload.split(".")[0] in sys.stdlib_module_names and payload.split(".")[0] not in NO_IMPORT)
                    )
                ):
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
                if (
                    isinstance(cls, type)
                    and issubclass(cls, Exception)
                    and not issubclass(cls, (StopIteration, StopAsyncIteration))
                ):
                    raise cls(value[1])
                raise ProgramError(f"{value[0]}: {value[1]}")
            self.broke(f"malformed answer from the program during {name}()")

        call.__name__ = call.__qualname__ = name
        return call
