"""Math tasks (gsm8k, math500, arithmetic) and the equivalence checker, table-driven."""

import threading

import pytest

from daca_bench.registry import get_task
from daca_bench.rewards.mathcheck import MathTimeout, as_number, equivalent

from repo_paths import FIXTURES as FIX

EQUIVALENT = [
    ("72", "72.0", True),
    ("72", "$72", True),
    ("72", "72.", True),
    ("72", "73", False),
    ("1,000", "1000", True),
    ("6,250", "6250", True),
    ("0.5", "1/2", True),
    ("-3", "\u22123", True),
    (r"\frac{14}{3}", "14/3", True),
    (r"\frac{14}{3}", "4.67", False),
    (r"\frac{1}{2}", r"\dfrac{1}{2}", True),
    (r"\sqrt{2}", "2^{1/2}", True),
    (r"\sqrt{2}", "1.414", False),
    (r"\left( 3, \frac{\pi}{2} \right)", r"(3, \pi/2)", True),
    (r"\left( 3, \frac{\pi}{2} \right)", r"(3, \pi)", False),
    (r"5\sqrt{2}", r"\sqrt{50}", True),
    ("2x+1", "1+2x", True),
    ("x=5", "5", True),
    (r"\text{A}", "A", True),
    (r"\text{(C)}", "C", True),
    (r"\text{(C)}", "D", False),
    ("72", "The answer is 72.", True),
    ("72", "72 dollars", True),
    ("2", "2, 3", False),
    ("3, -3", "-3, 3", True),
    ("18", "**18**", True),
    ("18", "18 km/h", True),
    ("18", "17 km/h", False),
    ("18", "18 apples and 3 pears", False),
    ("18", "18,000", False),
]


@pytest.mark.parametrize("gold,answer,same", EQUIVALENT)
def test_equivalent(gold, answer, same):
    assert equivalent(gold, answer) is same


def test_as_number():
    assert as_number("1,234.5") == as_number("1234.5") != None  # noqa: E711
    assert as_number("3/4") * 4 == 3
    assert as_number("x") is None and as_number("1,2") is None and as_number("") is None


def test_timeout_is_its_own_error_in_main_thread_and_in_threads():
    with pytest.raises(MathTimeout):
        equivalent("3", "3^{1000000000}", timeout=0.5)
    out = []

    def work():
        try:
            equivalent("3", "3^{1000000000}", timeout=0.5)
        except MathTimeout:
            out.append("timeout")
        out.append(equivalent(r"\frac{1}{3}", "1/3"))  # the helper still answers after a timeout

    t = threading.Thread(target=work)
    t.start()
    t.join(120)
    assert out == ["timeout", True]


def _task(name):
    return get_task(name, path=FIX / f"{name}.jsonl")


GSM8K = [  # (sample index, completion, status)
    (0, "3*12=36, 36-9=27\n<answer>\n27\n</answer>", "correct"),
    (0, "<answer>27 pencils</answer>", "correct"),
    (0, "so the total is 27", "correct"),  # untagged: the last number
    (0, "#### 27", "correct"),
    (0, r"The answer is $\boxed{27}$.", "correct"),
    (0, "<answer>\n28\n</answer>", "wrong"),  # a wrong number
    (0, "<answer>27</answer> hmm, no: <answer>26</answer>", "wrong"),  # the last tag counts
    (1, "<answer>6250</answer>", "correct"),  # gold `#### 6,250`
    (1, "<answer>6,250.00</answer>", "correct"),
    (2, "<answer>7</answer>", "correct"),
    (2, "<answer>-7</answer>", "wrong"),
    (3, "<answer>2.5</answer>", "correct"),
    (3, "<answer>5/2</answer>", "correct"),
    (4, "<answer>$720</answer>", "correct"),
    (4, "", "no_answer"),
    (4, "<answer></answer>", "no_answer"),
    (4, "I do not know", "no_answer"),
]


@pytest.mark.parametrize("index,completion,status", GSM8K)
def test_gsm8k(index, completion, status):
    task = _task("gsm8k")
    reward = task.verify(task.samples[index], completion)
    assert reward.status == status
    assert reward.value == (1.0 if status == "correct" else 0.0)


MATH500 = [
    (0, r"<answer>\frac{5}{6}</answer>", "correct"),
    (0, r"<answer>5/6</answer>", "correct"),
    (0, r"$\boxed{\frac{10}{12}}$", "correct"),
    (0, r"<answer>\frac{6}{5}</answer>", "wrong"),
    (1, r"<answer>(3, \frac{\pi}{2})</answer>", "correct"),
    (1, r"<answer>(3, \pi)</answer>", "wrong"),
    (2, r"<answer>5\sqrt{2}</answer>", "correct"),
    (2, r"<answer>\sqrt{50}</answer>", "correct"),
    (2, r"<answer>5\sqrt{3}</answer>", "wrong"),
    (3, "<answer>x = 4</answer>", "correct"),
    (4, "<answer>A</answer>", "correct"),
    (4, "<answer>B</answer>", "wrong"),
    (5, "<answer>-3, 3</answer>", "correct"),
    (5, "<answer>3</answer>", "wrong"),
    (5, "", "no_answer"),
]


@pytest.mark.parametrize("index,completion,status", MATH500)
def test_math500(index, completion, status):
    task = _task("math500")
    assert task.verify(task.samples[index], completion).status == status


def test_loaded_samples_have_stable_ids_and_gold_targets():
    a, b = _task("math500"), _task("math500")
    assert [s.id for s in a.samples] == [s.id for s in b.samples]
    assert a.samples[0].id == "math500/test/prealgebra/1.json"
    gsm = _task("gsm8k")
    assert gsm.samples[0].metadata["answer"] == "27" and "<<" not in gsm.samples[0].target
    assert all(gsm.verify(s, s.target).status == "correct" for s in gsm.samples)


def test_records_accept_problem_or_question_and_reject_missing_answer():
    t = get_task("gsm8k", records=[{"problem": "1+1?", "answer": "#### 2"}])
    assert t.verify(t.samples[0], "<answer>2</answer>").status == "correct"
    with pytest.raises(KeyError):
        get_task("gsm8k", records=[{"question": "1+1?"}])


def test_d1_shaping_is_opt_in():
    plain = _task("gsm8k")
    shaped = get_task("gsm8k", path=FIX / "gsm8k.jsonl", shaping="d1")
    s = plain.samples[0]
    good = "<reasoning>\n36-9\n</reasoning>\n<answer>\n27\n</answer>"
    assert plain.verify(s, good).value == 1.0
    r = shaped.verify(s, good)
    assert r.status == "correct" and r.value == pytest.approx(4.0)  # 2 + 0.5*3 + 0.125*4
    multi = "<reasoning>\na\nb\n</reasoning>\n<answer>\n26\n</answer>"  # multi-line reasoning still formats
    assert shaped.verify(s, multi).details["strict_format"] == 0.5
    assert shaped.verify(s, multi).value == pytest.approx(2.0)
    with pytest.raises(ValueError):
        get_task("gsm8k", path=FIX / "gsm8k.jsonl", shaping="d2")


ARITHMETIC = [
    ("13", "correct"),
    ("<answer>13</answer>", "correct"),
    ("= 13", "correct"),
    ("14", "wrong"),
    ("-13", "wrong"),
    ("", "no_answer"),
    ("x", "no_answer"),
]


@pytest.mark.parametrize("completion,status", ARITHMETIC)
def test_arithmetic(completion, status):
    task = get_task("arithmetic", records=[{"prompt": "17+5-9="}])
    assert task.samples[0].target == "13"
    assert task.verify(task.samples[0], completion).status == status


def test_arithmetic_splits_are_disjoint():
    train = {s.metadata["expression"] for s in get_task("arithmetic", split="train", n=2000).samples}
    test = {s.metadata["expression"] for s in get_task("arithmetic", split="test").samples}
    assert not train & test
