"""Code tasks (humaneval, mbpp, python_tiny): program assembly and verdict mapping with a
host-subprocess test double; the real Docker sandbox in the tests marked `docker`."""

import math

import pytest

from daca_bench.registry import get_task
from daca_bench.rewards import codecheck

import sandbox_double
from repo_paths import FIXTURES as FIX


@pytest.fixture
def double():
    codecheck.use_backend(sandbox_double)
    yield sandbox_double
    codecheck.use_backend(None)


def _he(n=3):
    return get_task("humaneval", n=n)


def test_humaneval_ships_164_problems_offline():
    task = get_task("humaneval")
    assert len(task.samples) == 164 and len({s.id for s in task.samples}) == 164
    assert task.samples[0].id == "humaneval/HumanEval/0"


HE0 = [  # completions for HumanEval/0 (has_close_elements), status
    ("CANONICAL", "correct"),
    ("    return False\n", "wrong"),  # a stub
    ("    pass\n", "wrong"),
    ("    import sys\n    sys.exit(0)\n", "wrong"),  # exiting early is not passing
    (
        "```python\nfrom typing import List\n\ndef has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
        "    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])\n```",
        "correct",
    ),
    ("Here:\n```python\ndef has_close_elements(numbers, threshold):\n    return True\n```", "wrong"),
    ("    while True:\n        pass\n", "timeout"),
    ("", "no_answer"),
    ("   \n", "no_answer"),
]


@pytest.mark.parametrize("completion,status", HE0)
def test_humaneval_verdicts(double, completion, status):
    task = get_task("humaneval", n=1, timeout=2.0)
    s = task.samples[0]
    r = task.verify(s, s.target if completion == "CANONICAL" else completion)
    assert r.status == status and r.value == (1.0 if status == "correct" else 0.0)


def test_program_assembly():
    s = _he(1).samples[0]
    code, how = codecheck.program(s, "    return True\n")
    assert code == s.prompt + "    return True\n" and how == "continuation"
    code, how = codecheck.program(s, "```python\ndef has_close_elements(a, b):\n    return 1\n```")
    assert code.startswith(s.prompt) and code.endswith("return 1\n") and how == "fence+definition"


VERDICTS = [
    ("passed", "correct", 1.0),
    ("failed", "wrong", 0.0),
    ("memory", "wrong", 0.0),
    ("output_limit", "wrong", 0.0),
    ("timeout", "timeout", 0.0),
    ("sandbox_error", "infra_error", None),
]


@pytest.mark.parametrize("verdict,status,value", VERDICTS)
def test_verdict_mapping(verdict, status, value):
    codecheck.use_backend(sandbox_double.Scripted([verdict]))
    try:
        s = _he(1).samples[0]
        r = _he(1).verify(s, "    return True\n")
    finally:
        codecheck.use_backend(None)
    assert r.status == status
    assert math.isnan(r.value) if value is None else r.value == value


def test_unavailable_sandbox_is_infra_error_not_zero():
    codecheck.use_backend(sandbox_double.Unavailable)
    try:
        task = _he(3)
        rewards = task.verify.batch(task.samples, [s.target for s in task.samples])
    finally:
        codecheck.use_backend(None)
    assert all(r.status == "infra_error" and math.isnan(r.value) for r in rewards)
    assert "unavailable" in rewards[0].details["error"]


MBPP = [  # sample index, completion, status
    (0, "```python\ndef sum_squares(xs):\n    return sum(x * x for x in xs)\n```", "correct"),
    (0, "def sum_squares(xs):\n    return sum(xs)\n", "wrong"),
    (0, "def sum_squares(xs):\n    pass\n", "wrong"),
    (1, "<answer>\ndef is_pal(s):\n    return s.lower() == s.lower()[::-1]\n</answer>", "correct"),
    (2, "```python\ndef gcd2(a, b):\n    return math.gcd(a, b)\n```", "correct"),  # setup code imports math
    (2, "", "no_answer"),
]


@pytest.mark.parametrize("index,completion,status", MBPP)
def test_mbpp(double, index, completion, status):
    task = get_task("mbpp", path=FIX / "mbpp.jsonl")
    assert task.verify(task.samples[index], completion).status == status


def test_mbpp_gold_and_fields(double):
    task = get_task("mbpp", path=FIX / "mbpp.jsonl")
    assert [s.id for s in task.samples] == ["mbpp/901", "mbpp/902", "mbpp/903"]
    assert all(task.verify(s, s.target).status == "correct" for s in task.samples)
    assert "assert sum_squares([1, 2, 3]) == 14" in task.samples[0].prompt
    assert task.samples[0].metadata["entry_point"] == "sum_squares"
    t = get_task(
        "mbpp",
        records=[{"prompt": "Add one.", "test_list": "assert inc(1) == 2\nassert inc(-1) == 0", "test_imports": []}],
    )
    assert t.verify(t.samples[0], "def inc(x):\n    return x + 1").status == "correct"
    with pytest.raises(KeyError):
        get_task("mbpp", records=[{"text": "no tests"}])


PY = [
    ("2*x+1", "correct"),
    ("x*2+1", "correct"),
    ("1+x+x", "correct"),
    ("2*x", "wrong"),
    ("```python\ndef f(x):\n    return 2 * x + 1\n```", "correct"),
    ("x if x < 3 else 2*x+1", "wrong"),  # fits some points only
    ("", "no_answer"),
]


@pytest.mark.parametrize("completion,status", PY)
def test_python_tiny(double, completion, status):
    rows = [{"examples": [[0, 1], [1, 3], [5, 11], [9, 19]], "tests": [[x, 2 * x + 1] for x in range(13)]}]
    task = get_task("python_tiny", records=rows)
    s = task.samples[0]
    assert s.prompt == "# f(0)=1 f(1)=3 f(5)=11 f(9)=19\ndef f(x): return "
    assert task.verify(s, completion).status == status


PARTIAL = [
    ("2*x+1", 1.0, "correct"),
    ("x if x < 3 else 2*x+1", 0.5 * 10 / 13, "wrong"),
    ("1//x", 0.0, "wrong"),
    ("2*x", 0.0, "wrong"),
    ("", 0.0, "no_answer"),
    ("(", 0.0, "wrong"),
]


@pytest.mark.parametrize("completion,value,status", PARTIAL)
def test_python_tiny_dense_reward_is_the_fraction_of_cases_passed(double, completion, value, status):
    rows = [{"examples": [[0, 1], [1, 3], [5, 11], [9, 19]], "tests": [[x, 2 * x + 1] for x in range(13)]}]
    dense, exact = get_task("python_tiny", records=rows, shaping="dense"), get_task("python_tiny", records=rows)
    s = dense.samples[0]
    r = dense.verify(s, completion)
    assert (r.status, r.value) == (status, pytest.approx(value))
    assert exact.verify(s, completion).status == status  # the verdict is the same; only the training reward differs
    with pytest.raises(ValueError, match="no 'd1' shaping"):
        get_task("python_tiny", records=rows, shaping="d1")


def test_a_counted_line_with_another_total_is_not_read():
    line = codecheck.TESTS_LINE
    assert codecheck.tests_passed(f"noise\n{line} 7 13\n", 13) == 7
    assert codecheck.tests_passed(f"{line} 13 99\n", 13) is None
    assert (
        codecheck.tests_passed(f"{line} 3 13\n{line} 9 13", 13) == 9
    )  # the last (the harness prints after the program)
    assert codecheck.tests_passed("", 13) is None


def test_python_tiny_generated(double):
    train, test = get_task("python_tiny", split="train", n=500), get_task("python_tiny", split="test", n=30)
    rewards = test.verify.batch(test.samples, [s.target for s in test.samples])
    assert all(r.status == "correct" for r in rewards)
    instance = lambda s: (tuple(y for _, y in s.metadata["tests"]), s.prompt)  # noqa: E731
    assert not {instance(s) for s in train.samples} & {instance(s) for s in test.samples}
    for s in test.samples:
        assert s.prompt.isascii() and len(s.prompt) <= 64 and len(s.target) <= 12


# ---- the real sandbox ------------------------------------------------------------------------
@pytest.mark.docker
def test_humaneval_canonical_solutions_all_pass_in_docker():
    task = get_task("humaneval")
    rewards = task.verify.batch(task.samples, [s.target for s in task.samples], workers=2)
    if rewards[0].status == "infra_error" and "unavailable" in rewards[0].details.get("error", ""):
        pytest.skip(f"Docker sandbox unavailable: {rewards[0].details['error'][:120]}")
    bad = [
        (s.id, r.status, r.details.get("stderr_tail", "")[-200:])
        for s, r in zip(task.samples, rewards)
        if r.status != "correct"
    ]
    assert not bad
    assert sum(r.value for r in rewards) == 164


@pytest.mark.docker
def test_humaneval_stubs_all_fail_in_docker():
    task = get_task("humaneval")
    rewards = task.verify.batch(task.samples, ["    pass\n"] * len(task.samples), workers=2)
    if rewards[0].status == "infra_error":
        pytest.skip(f"Docker sandbox unavailable: {str(rewards[0].details)[:300]}")
    assert sum(r.value for r in rewards) == 0
    assert {r.status for r in rewards} == {"wrong"}


@pytest.mark.docker
def test_python_tiny_partial_credit_in_docker():
    rows = [{"examples": [[0, 1], [1, 3], [5, 11], [9, 19]], "tests": [[x, 2 * x + 1] for x in range(13)]}]
    task = get_task("python_tiny", records=rows, shaping="dense")
    s = task.samples[0]
    rewards = task.verify.batch([s] * 3, ["2*x+1", "x if x < 3 else 2*x+1", "x//0"])
    if rewards[0].status == "infra_error":
        pytest.skip(f"Docker sandbox unavailable: {str(rewards[0].details)[:300]}")
    assert [r.status for r in rewards] == ["correct", "wrong", "wrong"]
    assert [r.value for r in rewards] == [1.0, pytest.approx(0.5 * 10 / 13), 0.0]


@pytest.mark.docker
def test_tiny_python_and_exit_tricks_in_docker():
    task = get_task("python_tiny", split="test", n=20)
    tricks = ["__import__('os')._exit(0)", "exit()", "(_ for _ in ()).throw(SystemExit(0))"]
    rewards = task.verify.batch(list(task.samples) + [task.samples[0]] * 3, [s.target for s in task.samples] + tricks)
    if rewards[0].status == "infra_error":
        pytest.skip(f"Docker sandbox unavailable: {str(rewards[0].details)[:300]}")
    assert [r.status for r in rewards] == ["correct"] * 20 + ["wrong"] * 3


@pytest.mark.docker
def test_redefining_a_helper_the_test_calls_does_not_fake_a_pass_in_docker():
    """HumanEval/32's test checks `poly(coeffs, find_zero(coeffs))`; a completion that also
    redefines `poly` to return 0 must not pass (the test uses the prompt's own helper)."""
    task = get_task("humaneval")
    sample = next(s for s in task.samples if s.id == "humaneval/HumanEval/32")
    hack = "def poly(xs, x):\n    return 0\n\n\ndef find_zero(xs):\n    return 0.0\n"
    honest = sample.target
    rewards = task.verify.batch([sample, sample], [hack, honest])
    if rewards[0].status == "infra_error":
        pytest.skip(f"Docker sandbox unavailable: {str(rewards[0].details)[:300]}")
    assert [r.status for r in rewards] == ["wrong", "correct"]
