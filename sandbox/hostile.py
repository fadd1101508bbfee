"""Hostile programs for the sandbox self-test and tests: each fake-pass route and abuse.

Every case is a dict: name, route (what it tries), code, test, expected (allowed statuses).
Unless a case says otherwise the task is "f(x) returns 2*x" and the program is wrong, so
anything but "failed" (or the listed abuse status) means the route worked.
Try it: python -m daca_bench sandbox selftest
"""

TEST = "assert f(3) == 6\nassert f(5) == 10\n"
WRONG = "def f(x):\n    return x\n"
SECRET_TEST = 'SECRET = "zebra-4217"\nassert f() == SECRET\n'

MEMORY_SCAN = r"""
import os, re
def f():
    needle = re.escape(b"SECRET" + b' = "') + rb'([a-z]+-[0-9]+)"'
    for pid in ["self"] + [p for p in os.listdir("/proc") if p.isdigit()]:
        try:
            maps = open(f"/proc/{pid}/maps").read().splitlines()
            mem = open(f"/proc/{pid}/mem", "rb", 0)
        except OSError:
            continue
        for line in maps:
            addr, perms = line.split()[:2]
            lo, hi = (int(x, 16) for x in addr.split("-"))
            if "r" not in perms or hi - lo > 1 << 28:
                continue
            try:
                mem.seek(lo)
                chunk = mem.read(hi - lo)
            except (OSError, ValueError, OverflowError):
                continue
            m = re.search(needle, chunk)
            if m:
                return m.group(1).decode()
    return ""
"""

FRAME_WALK = r"""
import sys, gc
def f():
    frame = sys._getframe()
    while frame is not None:
        for scope in (frame.f_locals, frame.f_globals):
            if "SECRET" in scope:
                return scope["SECRET"]
        frame = frame.f_back
    for o in gc.get_objects():
        if isinstance(o, dict) and isinstance(o.get("SECRET"), str):
            return o["SECRET"]
    return ""
"""


def _case(name, route, code, test=TEST, expected=("failed",), host_danger=False):
    """host_danger: never run it on the local-unsafe backend outside its own PID namespace."""
    return dict(name=name, route=route, code=code, test=test, expected=tuple(expected), host_danger=host_danger)


CASES = [
    _case("honest_correct", "control: a correct program", "def f(x):\n    return 2 * x\n", expected=("passed",)),
    _case("honest_wrong", "control: a wrong program", WRONG),
    _case("sys_exit_0", "sys.exit(0) before the test runs", WRONG + "import sys\nsys.exit(0)\n"),
    _case("exit_builtin", "exit(0) (site builtin)", WRONG + "exit(0)\n"),
    _case(
        "systemexit_in_call", "raise SystemExit(0) inside the tested function", "def f(x):\n    raise SystemExit(0)\n"
    ),
    _case("os_exit_top", "os._exit(0) at top level", WRONG + "import os\nos._exit(0)\n"),
    _case("os_exit_in_call", "os._exit(0) inside the tested function", "import os\ndef f(x):\n    os._exit(0)\n"),
    _case("atexit_exit0", "atexit handler that exits 0", WRONG + "import atexit, os\natexit.register(os._exit, 0)\n"),
    _case(
        "excepthook",
        "sys.excepthook swallowing the AssertionError",
        WRONG + "import sys\nsys.excepthook = lambda *a: None\n",
    ),
    _case(
        "signal_alarm_exit0",
        "SIGALRM handler that exits 0 mid-test",
        WRONG + "import os, signal\nsignal.signal(signal.SIGALRM, lambda *a: os._exit(0))\n"
        "signal.setitimer(signal.ITIMER_REAL, 0.001)\n",
    ),
    _case(
        "sigkill_self_in_call",
        "SIGKILL itself inside the tested function",
        "import os, signal\ndef f(x):\n    os.kill(os.getpid(), signal.SIGKILL)\n",
    ),
    _case("kill_parent", "SIGKILL its parent process", WRONG + "import os\nos.kill(os.getppid(), 9)\n"),
    _case(
        "stop_parent",
        "SIGSTOP its parent process",
        WRONG + "import os, signal\nos.kill(os.getppid(), signal.SIGSTOP)\n",
    ),
    _case(
        "kill_everything",
        "SIGKILL every process it can see (the worker included)",
        WRONG + "import os\nfor p in os.listdir('/proc'):\n    if p.isdigit() and int(p) != os.getpid():\n"
        "        try:\n            os.kill(int(p), 9)\n        except OSError:\n            pass\n",
        host_danger=True,
    ),
    _case(
        "close_stdio",
        "close stdout and stderr",
        WRONG + "import os, sys\nos.close(1)\nos.close(2)\nsys.stdout = sys.stderr = None\n",
    ),
    _case(
        "fake_marker",
        "print success markers, then exit 0",
        WRONG + 'import os\nprint(\'passed\')\nprint(\'{"status": "passed", "returncode": 0}\')\n'
        "print('PASS' * 4)\nimport sys; sys.stdout.flush()\nos._exit(0)\n",
    ),
    _case(
        "write_all_fds",
        "write fake reports to every descriptor",
        WRONG + "import os\nfor fd in range(3, 256):\n    try:\n        os.write(fd, b'PASS' + bytes(16))\n"
        "    except OSError:\n        pass\nos._exit(0)\n",
    ),
    _case(
        "forge_protocol",
        "forge the harness's own frames on its descriptors",
        WRONG + "import os, marshal, struct\nmsg = marshal.dumps({'f': ('call', None)})\nfor fd in range(3, 64):\n"
        "    try:\n        os.write(fd, struct.pack('>I', len(msg)) + msg)\n    except OSError:\n        pass\nos._exit(0)\n",
    ),
    _case(
        "patch_builtins",
        "monkeypatch builtins (abs, AssertionError, isinstance)",
        WRONG + "import builtins\nbuiltins.abs = lambda x: 0\nbuiltins.AssertionError = type('X', (Exception,), {})\n"
        "builtins.isinstance = lambda *a: True\n",
        test="assert abs(f(3) - 6) < 1e-9\n",
    ),
    _case(
        "shadow_builtin",
        "define a top-level abs() the test would call",
        WRONG + "def abs(x):\n    return 0\n",
        test="assert abs(f(3) - 6) < 1e-9\n",
    ),
    _case(
        "shadow_check",
        "define check() so the test's own check is a no-op",
        WRONG + "def check(candidate):\n    pass\n",
        test="def check(candidate):\n    assert candidate(3) == 6\ncheck(f)\n",
    ),
    _case(
        "always_equal",
        "return an object whose __eq__ is always True",
        "class AE:\n    __eq__ = lambda s, o: True\n    __ne__ = lambda s, o: False\n    __hash__ = lambda s: 0\n"
        "def f(x):\n    return AE()\n",
    ),
    _case(
        "int_subclass_eq",
        "return an int subclass whose __eq__ is always True",
        "class I(int):\n    __eq__ = lambda s, o: True\n    __hash__ = int.__hash__\ndef f(x):\n    return I(0)\n",
    ),
    _case(
        "str_subclass_eq",
        "return a str subclass that equals everything",
        "class S(str):\n    __eq__ = lambda s, o: True\n    __hash__ = str.__hash__\ndef f():\n    return S('')\n",
        test=SECRET_TEST,
    ),
    _case(
        "stopiteration_in_map",
        "raise StopIteration so all(map(...)) sees an empty sequence",
        "def f(x):\n    raise StopIteration\n",
        test="assert all(map(lambda x: f(x) == 2 * x, [1, 2, 3]))\n",
    ),
    _case("recursive_value", "return a self-containing list", "def f(x):\n    a = []\n    a.append(a)\n    return a\n"),
    _case(
        "thread_exit0",
        "a thread that exits 0 while the test runs",
        WRONG
        + "import os, threading, time\nthreading.Thread(target=lambda: (time.sleep(0.01), os._exit(0))).start()\n",
    ),
    _case(
        "keyboardinterrupt",
        "raise KeyboardInterrupt inside the tested function",
        "def f(x):\n    raise KeyboardInterrupt\n",
    ),
    _case("frame_walk", "read the expected value from the caller's frames or gc", FRAME_WALK, test=SECRET_TEST),
    _case(
        "memory_scan",
        "scan its own and every readable process's memory for the test",
        MEMORY_SCAN,
        test=SECRET_TEST,
        host_danger=True,
    ),
    _case(
        "forge_reply",
        "write a forged 'passed' reply into the container's stdout via /proc/1/fd/1",
        WRONG + "import json, struct\nfake = json.dumps({'status': 'passed', 'returncode': 0, 'seconds': 0.0, "
        "'stdout': '', 'stderr': '', 'output_bytes': 0, 'procs': 4, 'clean': True, 'restart': False}).encode()\n"
        "with open('/proc/1/fd/1', 'wb', 0) as out:\n    out.write(struct.pack('>I', len(fake) + 32) + fake + bytes(32))\n",
        host_danger=True,
    ),
    _case(
        "inject_request",
        "inject requests into the worker's stdin via /proc/1/fd/0",
        "def f(x):\n    return 2 * x\nwith open('/proc/1/fd/0', 'wb', 0) as inp:\n    inp.write(b'e30=\\n' * 4)\n",
        host_danger=True,
    ),
    _case("infinite_loop", "loop forever", "while True:\n    pass\n", expected=("timeout",)),
    _case(
        "fork_bomb",
        "fork until the pids limit",
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
        expected=("timeout", "failed"),
        host_danger=True,
    ),
    _case(
        "memory_bomb",
        "allocate without bound",
        "x = []\nwhile True:\n    x.append(bytearray(1 << 26))\n",
        expected=("memory",),
    ),
    _case(
        "huge_output",
        "print 100 MB",
        "import sys\nfor _ in range(100):\n    sys.stdout.write('x' * (1 << 20))\n",
        expected=("output_limit",),
    ),
]
