"""Tests of the Docker code sandbox (daca_bench/containers/ + sandbox/worker/), one behaviour each.

They need a running Docker engine and build the sandbox image if it is missing (about two
minutes, once).  Without an engine they FAIL with a message saying how to start one; set
DACA_BENCH_SKIP_DOCKER=1 to skip them deliberately.
Run: .venv/bin/python -m pytest tests/unit/containers/test_sandbox.py -x -q
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from daca_bench import containers as sandbox
from daca_bench.containers import ExecResult, Pool, SandboxUnavailable, image, payload
from daca_bench.containers import cli as sandbox_cli
from daca_bench.containers import pool as pool_module

CASES = {c["name"]: c for c in sandbox_cli.hostile_cases()}
FAKE_PASS = [n for n, c in CASES.items() if c["expected"] == ("failed",) and n != "honest_wrong"]
TEST = CASES["honest_wrong"]["test"]
GOOD = CASES["honest_correct"]["code"]
BASELINE_PROCS = 5  # docker-init, worker W, zygote Z, test runner B, and the program itself


def _require_docker():
    if os.environ.get("DACA_BENCH_SKIP_DOCKER") == "1":
        pytest.skip("DACA_BENCH_SKIP_DOCKER=1: sandbox tests skipped on purpose")
    client, problem = None, None
    try:
        client = image.docker_client()
    except SandboxUnavailable as e:
        problem = str(e)
    if problem:  # (outside the except block, so that pytest shows only this message)
        pytest.fail(
            f"the sandbox tests need Docker and it is not reachable: {problem}\n"
            "(set DACA_BENCH_SKIP_DOCKER=1 to skip them on purpose)",
            pytrace=False,
        )
    if not image.image_exists(client, sandbox.image_tag()):
        sandbox.build()


@pytest.fixture(scope="module")
def pool():
    _require_docker()
    with Pool(size=2, backend="docker") as p:
        yield p


@pytest.fixture(scope="module")
def solo():
    """One container, so that consecutive programs share it."""
    _require_docker()
    with Pool(size=1, backend="docker") as p:
        yield p


def _procs_probe() -> str:
    return "import os\nprint(sum(p.isdigit() for p in os.listdir('/proc')))\n"


# ---------------------------------------------------------------- honest programs
@pytest.mark.docker
def test_honest_correct_program_passes(pool):
    r = pool.run(GOOD, TEST, timeout=5)
    assert isinstance(r, ExecResult) and r.status == "passed" and r.backend == "docker", r


@pytest.mark.docker
def test_honest_wrong_program_fails(pool):
    r = pool.run(CASES["honest_wrong"]["code"], TEST, timeout=5)
    assert r.status == "failed" and "AssertionError" in r.stderr, r


@pytest.mark.docker
def test_humaneval_style_check_passes(pool):
    code = "from typing import List\n\ndef add(xs: List[int]) -> int:\n    return sum(xs)\n"
    test = "METADATA = {}\n\ndef check(candidate):\n    assert candidate([1, 2]) == 3\n    assert candidate([]) == 0\n\ncheck(add)\n"
    assert pool.run(code, test).status == "passed"


@pytest.mark.docker
def test_program_exceptions_reach_the_test_as_builtin_types(pool):
    code = "def f(x):\n    if x < 0:\n        raise ValueError('negative')\n    return x\n"
    test = (
        "try:\n    f(-1)\nexcept ValueError as e:\n    assert 'negative' in str(e)\nelse:\n    raise AssertionError\n"
    )
    assert pool.run(code, test).status == "passed"


# ---------------------------------------------------------------- abuse
@pytest.mark.docker
def test_infinite_loop_ends_within_timeout_plus_one_second(pool):
    t0 = time.monotonic()
    r = pool.run("while True:\n    pass\n", "", timeout=1.0)
    assert r.status == "timeout" and time.monotonic() - t0 < 2.0, r


@pytest.mark.docker
def test_fork_bomb_is_contained_and_the_next_program_runs_normally(solo):
    r = solo.run(CASES["fork_bomb"]["code"], "", timeout=2.0)
    assert r.status in ("timeout", "failed"), r
    t0 = time.monotonic()
    nxt = solo.run(_procs_probe(), "", timeout=5)
    assert nxt.status == "passed" and int(nxt.stdout) == BASELINE_PROCS and time.monotonic() - t0 < 3, nxt


@pytest.mark.docker
def test_memory_bomb_is_reported_as_memory(pool):
    r = pool.run(CASES["memory_bomb"]["code"], "", timeout=10)
    assert r.status == "memory", r


@pytest.mark.docker
def test_memory_bomb_that_touches_its_pages_is_reported_as_memory(pool):
    code = "x = []\nwhile True:\n    x.append(b'x' * (1 << 22))\n"  # resident, not only reserved
    r = pool.run(code, "", timeout=10)
    assert r.status == "memory", r


@pytest.mark.docker
def test_no_network(pool):
    code = (
        "import os, socket\ndef probe():\n    try:\n        socket.create_connection(('1.1.1.1', 53), timeout=1)\n"
        "        return 'connected'\n    except OSError as e:\n        return type(e).__name__\n"
        "def interfaces():\n    return sorted(os.listdir('/sys/class/net'))\n"
    )
    test = "assert probe() != 'connected'\nassert interfaces() == ['lo']\n"
    r = pool.run(code, test)
    assert r.status == "passed", r


@pytest.mark.docker
def test_writes_outside_tmp_fail_and_nothing_reaches_the_host(pool):
    name = f"daca-probe-{uuid.uuid4().hex}"
    code = (
        f"import os\ndef attempts():\n    ok = []\n    for d in ['/', '/etc', '/usr', '/opt', '/var/tmp', '/root', '/dev/shm', '/home']:\n"
        f"        try:\n            open(os.path.join(d, '{name}'), 'w').write('x')\n            ok.append(d)\n"
        f"        except OSError:\n            pass\n    return ok\n"
        f"def tmp_works():\n    open('/tmp/{name}', 'w').write('x')\n    return os.path.exists('/tmp/{name}')\n"
    )
    r = pool.run(code, "assert attempts() == []\nassert tmp_works()\n")
    assert r.status == "passed", r
    assert not (Path("/tmp") / name).exists() and not (Path("/") / name).exists()


@pytest.mark.docker
def test_tmp_is_wiped_between_programs(solo):
    solo.run("open('/tmp/left-behind', 'w').write('x')\n", "")
    r = solo.run("import os\nprint(os.listdir('/tmp'))\n", "")
    assert r.status == "passed" and r.stdout.strip() == "[]", r


@pytest.mark.docker
def test_100_megabytes_of_output_are_capped(pool):
    t0 = time.monotonic()
    r = pool.run(CASES["huge_output"]["code"], "", timeout=10)
    assert r.status == "output_limit" and len(r.stdout) <= pool.limits.output_cap, (r.status, len(r.stdout))
    assert time.monotonic() - t0 < 5


@pytest.mark.docker
def test_setsid_child_does_not_survive_into_the_next_program(solo):
    code = (
        "import os, time\npid = os.fork()\nif pid == 0:\n    os.setsid()\n    time.sleep(60)\n    os._exit(0)\n"
        "time.sleep(0.3)\nprint(pid)\n"
    )
    first = solo.run(code, "", timeout=5)
    assert first.status == "passed", first
    pid = int(first.stdout)
    probe = f"import os\nprint(os.path.exists('/proc/{pid}'), sum(p.isdigit() for p in os.listdir('/proc')))\n"
    second = solo.run(probe, "", timeout=5)
    assert second.stdout.split() == ["False", str(BASELINE_PROCS)], second


# ---------------------------------------------------------------- proofs of a pass
@pytest.mark.docker
@pytest.mark.parametrize("name", FAKE_PASS)
def test_fake_pass_route_is_scored_failed(pool, name):
    case = CASES[name]
    r = pool.run(case["code"], case["test"], timeout=3)
    assert r.status == "failed", (case["route"], r)


@pytest.mark.docker
def test_memory_scan_finds_a_secret_that_is_really_in_its_memory(pool):
    """Control for the memory_scan route: the scanner works, so its failure means isolation."""
    case = CASES["memory_scan"]
    r = pool.run(case["code"] + "\nHINT = 'SECRET = \"zebra-4217\"'\n", case["test"], timeout=5)
    assert r.status == "passed", r


@pytest.mark.docker
def test_previous_jobs_tests_do_not_leak_into_the_next_program(solo):
    honest = "def f():\n    return 'zeb' + 'ra-4217'\n"
    assert solo.run(honest, CASES["memory_scan"]["test"]).status == "passed"
    r = solo.run(CASES["memory_scan"]["code"], CASES["memory_scan"]["test"], timeout=5)
    assert r.status == "failed", r


@pytest.mark.docker
def test_programs_cannot_ptrace_docker_init_or_the_harness(pool):
    code = (
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]\n"
        "def attached():\n    me = os.getpid()\n"
        "    pids = [int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) != me]\n"
        "    return [p for p in pids if libc.ptrace(16, p, None, None) == 0]\n"
    )  # PTRACE_ATTACH
    r = pool.run(code, "assert attached() == []\n")
    assert r.status == "passed", r


# ---------------------------------------------------------------- pool behaviour
@pytest.mark.docker
def test_killed_worker_is_replaced_and_the_batch_completes(pool):
    jobs = [(GOOD, TEST)] * 3 + [(CASES["kill_everything"]["code"], TEST)] + [(GOOD, TEST)] * 3
    results = pool.run_batch(jobs, timeout=3)
    assert [r.status for r in results] == ["passed"] * 3 + ["failed"] + ["passed"] * 3, results


@pytest.mark.docker
def test_killed_container_is_replaced_and_the_batch_completes(pool):
    slow = ("import time\ntime.sleep(0.4)\n" + GOOD, TEST)

    def kill_one():
        time.sleep(0.2)
        for slot in pool.slots:
            if slot.container is not None:
                slot.container.kill()
                return

    killer = threading.Thread(target=kill_one)
    killer.start()
    results = pool.run_batch([slow] * 6, timeout=5)
    killer.join()
    assert [r.status for r in results] == ["passed"] * 6, [r.stderr for r in results]


@pytest.mark.docker
def test_batch_returns_results_in_order(pool):
    jobs = [(f"import time\ntime.sleep({0.05 * (8 - i)})\nprint({i})\n", "") for i in range(8)]
    results = pool.run_batch(jobs, timeout=5)
    assert [r.stdout.strip() for r in results] == [str(i) for i in range(8)], results


@pytest.mark.docker
def test_get_pool_is_one_lazily_created_pool(monkeypatch):
    _require_docker()
    monkeypatch.setenv("DACA_BENCH_SANDBOX", "docker")
    monkeypatch.setattr(pool_module, "_POOL", None)
    p = sandbox.get_pool(size=1)
    try:
        assert sandbox.get_pool() is p and sandbox.run_tests(GOOD, TEST).status == "passed"
        assert [r.status for r in sandbox.run_batch([(GOOD, TEST), ("x = ", "")])] == ["passed", "failed"]
    finally:
        p.close()


# ---------------------------------------------------------------- no engine, no silence
def test_unreachable_docker_raises_sandbox_unavailable(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    monkeypatch.delenv("DACA_BENCH_SANDBOX", raising=False)
    with pytest.raises(SandboxUnavailable, match="setup_docker.sh"):
        Pool(size=1)


def test_local_backend_runs_only_when_chosen_and_says_so(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    monkeypatch.setenv("DACA_BENCH_SANDBOX", "local-unsafe")
    with Pool(size=1) as p:
        r = p.run(GOOD, TEST)
    assert r.status == "passed" and r.backend == "local-unsafe", r


# ---------------------------------------------------------------- the worker package as a payload
def test_payload_carries_every_module_of_the_worker_package():
    folder = image.SANDBOX_DIR / payload.PACKAGE
    files = sorted(folder.glob("*.py"))
    sources = payload.worker_sources()
    assert {origin for origin, _ in sources.values()} == {f"sandbox/{payload.PACKAGE}/{f.name}" for f in files}
    assert all(src == (folder / origin.rsplit("/", 1)[1]).read_text() for origin, src in sources.values())
    assert max(len(f.read_text().splitlines()) for f in files) <= 450
    assert len(payload.worker_program().encode()) <= payload.ARG_MAX


def test_worker_tracebacks_show_the_packaged_source_lines(tmp_path):
    """The payload imports the package from memory, and the worker's own tracebacks (traceback.format_exc)
    still show each frame's path and source line (run away from the checkout, so no file is read)."""
    program = payload.worker_program().replace(
        f"from {payload.PACKAGE}.main import main\nmain()",
        f"import traceback, {payload.PACKAGE}.values as v\ntry:\n    v.decode('{{\"t\": 1}}')\n"
        "except ValueError:\n    print(traceback.format_exc())",
    )
    r = subprocess.run(
        [sys.executable, "-I", "-B", "-c", program], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert r.returncode == 0 and 'sandbox/worker/values.py", line' in r.stdout, r.stderr
    assert 'raise ValueError("malformed value")' in r.stdout, r.stdout


def test_incomplete_worker_package_is_one_clear_error(tmp_path, monkeypatch):
    (tmp_path / payload.PACKAGE).mkdir()
    (tmp_path / payload.PACKAGE / "__init__.py").write_text("")
    monkeypatch.setattr(payload, "SANDBOX_DIR", tmp_path)
    with pytest.raises(FileNotFoundError, match="main.py"):
        payload.worker_program()
