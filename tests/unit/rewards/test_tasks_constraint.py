"""Constraint tasks: sudoku / sudoku_tiny and countdown / countdown_tiny, table-driven."""

import sys

import pytest

from daca_bench.registry import get_task, load_all

load_all()  # task files are imported by path, as daca_bench_tasks.<file>
C = sys.modules["daca_bench_tasks.countdown"]
S = sys.modules["daca_bench_tasks.sudoku"]

GRID4 = "1234341243212143"


def _sudoku(puzzle, solution=None, name="sudoku"):
    row = {"puzzle": puzzle, **({"solution": solution} if solution else {})}
    task = get_task(name, records=[row])
    return task, task.samples[0]


PUZ = "1200340000210003"  # a 4x4 puzzle with GRID4's givens (solution unique: checked below)


def test_fixture_puzzle_is_unique():
    n, cells = S.parse_puzzle(PUZ)
    assert ["".join(map(str, g)) for g in S.solve(n, cells)] == [GRID4]


SUDOKU = [  # completion, status, blank fraction correct
    ("<answer>\n1234\n3412\n4321\n2143\n</answer>", "correct", 1.0),
    ("1234341243212143", "correct", 1.0),
    ("1 2 3 4\n3 4 1 2\n4 3 2 1\n2 1 4 3", "correct", 1.0),
    ("<answer>[[1,2,3,4],[3,4,1,2],[4,3,2,1],[2,1,4,3]]</answer>", "correct", 1.0),
    ("1234341243211243", "wrong", 7 / 9),  # two blanks swapped: invalid
    ("2134341243212143", "wrong", 1.0),  # a changed given (1<->2 in the first row): invalid too
    ("<answer>1234 3412</answer>", "wrong", None),  # tagged but no full grid
    ("", "no_answer", None),
    ("I cannot solve it", "no_answer", None),
]


@pytest.mark.parametrize("completion,status,fraction", SUDOKU)
def test_sudoku_4x4(completion, status, fraction):
    task, sample = _sudoku(PUZ)
    r = task.verify(sample, completion)
    assert r.status == status and r.value == (1.0 if status == "correct" else 0.0)
    if fraction is not None:
        assert r.details["blank_fraction_correct"] == pytest.approx(fraction)


def test_a_valid_grid_that_changes_a_given_scores_zero():
    # relabel digits 1<->2 everywhere: still a valid sudoku, but the givens changed
    other = GRID4.translate(str.maketrans("12", "21"))
    assert S.is_valid_solution(4, [int(c) for c in other])
    task, sample = _sudoku(PUZ)
    r = task.verify(sample, other)
    assert r.status == "wrong" and r.details["givens_changed"] > 0 and r.details["valid"]


def test_puzzle_field_forms():
    forms = [
        PUZ,
        PUZ.replace("0", "."),
        "12.. 34.. ..21 ...3",
        [int(c) for c in PUZ],
        [[int(c) for c in PUZ[i : i + 4]] for i in range(0, 16, 4)],
        list(PUZ.replace("0", ".")),
    ]
    for form in forms:
        task, sample = _sudoku(form)
        assert sample.metadata["puzzle"] == PUZ
        assert task.verify(sample, GRID4).status == "correct"
    for bad in ["123", "1234" * 5, {"a": 1}, "1100000000000000"]:  # wrong size, type, clashing givens
        with pytest.raises((ValueError, KeyError, TypeError)):
            _sudoku(bad)


def test_d1_shaping_gives_partial_credit():
    task = get_task("sudoku", records=[{"puzzle": PUZ}], shaping="d1")
    assert task.verify(task.samples[0], "1234341243211243").value == pytest.approx(7 / 9)
    assert task.verify(task.samples[0], GRID4).value == 1.0


def test_9x9():
    task = get_task("sudoku", split="test", n=2, sizes=(9,))
    s = task.samples[0]
    assert s.metadata["size"] == 9 and task.verify(s, s.target).status == "correct"
    sol = s.metadata["solution"]
    blank = s.metadata["puzzle"].index("0")
    wrong = sol[:blank] + str(int(sol[blank]) % 9 + 1) + sol[blank + 1 :]
    assert task.verify(s, wrong).status == "wrong"
    held = get_task("sudoku", records=[{"puzzle": s.metadata["puzzle"]}])  # no solution given: solved
    assert held.verify(held.samples[0], sol).status == "correct"


@pytest.mark.parametrize("name,n", [("sudoku", 24), ("sudoku_tiny", 300)])
def test_generated_puzzles_unique_and_splits_disjoint_by_solution_grid(name, n):
    train = get_task(name, split="train", n=n).samples
    test = get_task(name, split="test", n=n // 3).samples
    for s in list(train)[:40] + list(test)[:40]:
        n = s.metadata["size"]
        assert len(S.solve(n, [int(c) for c in s.metadata["puzzle"]])) == 1
    train_grids = {s.metadata["solution"] for s in train}
    test_grids = {s.metadata["solution"] for s in test}
    assert train_grids and test_grids and not train_grids & test_grids


def test_tiny_sudoku_shape():
    s = get_task("sudoku_tiny", n=1).samples[0]
    assert s.prompt.startswith("sudoku ") and len(s.target) == 16 and s.target.isdigit()


# ---- countdown ----------------------------------------------------------------------------
def _countdown(numbers, target, name="countdown", **kw):
    task = get_task(name, records=[{"numbers": numbers, "target": target}], **kw)
    return task, task.samples[0]


COUNTDOWN = [  # numbers 3 5 7, target 22
    ("<answer>3*5+7</answer>", "correct", None),
    ("<answer>\n(5 * 3) + 7\n</answer>", "correct", None),
    ("<answer>7 + 3 × 5</answer>", "correct", None),
    ("<answer>3*5+7 = 22</answer>", "correct", None),
    ("3*5+7", "correct", None),  # untagged
    ("so 3*5 = 15 and 15 + 7 = 22, answer: 5*3+7", "correct", None),
    ("<answer>3*5+7+0</answer>", "wrong", "numbers_not_used_once"),  # an extra number
    ("<answer>3*5*7</answer>", "wrong", None),  # wrong value
    ("<answer>3*7+7</answer>", "wrong", "numbers_not_used_once"),  # a number used twice
    ("<answer>5*3+7-3+3</answer>", "wrong", "numbers_not_used_once"),
    ("<answer>3*5</answer>", "wrong", "numbers_not_used_once"),  # a number missing
    ("<answer>-3+5*5</answer>", "wrong", "unparseable"),  # unary minus
    ("<answer>3**5+7</answer>", "wrong", "unparseable"),  # power
    ("<answer>__import__('os')</answer>", "wrong", "no_expression"),
    ("<answer>(3*5+7</answer>", "wrong", "unparseable"),
    ("<answer>7/(5-5)+3</answer>", "wrong", None),  # 5 twice -> numbers first? division by zero
    ("", "no_answer", None),
    ("<answer></answer>", "no_answer", None),
    ("no idea", "no_answer", None),
]


@pytest.mark.parametrize("completion,status,reason", COUNTDOWN)
def test_countdown(completion, status, reason):
    task, sample = _countdown([3, 5, 7], 22)
    r = task.verify(sample, completion)
    assert r.status == status and r.value == (1.0 if status == "correct" else 0.0)
    if reason:
        assert r.details["reason"] == reason


def test_countdown_exact_rationals():
    task, sample = _countdown([1, 3, 4, 6], 24)
    assert task.verify(sample, "<answer>6/(1-3/4)</answer>").status == "correct"  # 6 / (1/4)
    assert task.verify(sample, "<answer>6/1-3/4</answer>").status == "wrong"
    task, sample = _countdown([4, 4, 2], 0)
    assert task.verify(sample, "<answer>(4-4)/2</answer>").status == "correct"
    assert task.verify(sample, "<answer>2/(4-4)</answer>").details["reason"] == "division_by_zero"


def test_countdown_field_forms_and_bad_records():
    for numbers in ([3, 5, 7], "3 5 7", "[3, 5, 7]", ["3", "5", "7"]):
        task, sample = _countdown(numbers, "22")
        assert task.verify(sample, "3*5+7").status == "correct"
    task = get_task("countdown", records=[{"nums": [3, 5, 7], "target": 22}])
    assert task.verify(task.samples[0], "7+5*3").status == "correct"
    for row in (
        {"numbers": [3, 5, 7]},
        {"numbers": [3], "target": 3},
        {"numbers": "x", "target": 1},
        {"numbers": [1, 2], "target": 1.5},
    ):
        with pytest.raises((KeyError, ValueError, TypeError)):
            get_task("countdown", records=[row])


def test_countdown_d1_shaping():
    task, sample = _countdown([3, 5, 7], 22, shaping="d1")
    assert task.verify(sample, "<answer>3*5+7</answer>").value == 1.0
    assert task.verify(sample, "<answer>3+5+7</answer>").value == pytest.approx(0.1)
    assert task.verify(sample, "3+5+7").value == 0.0


def test_evaluate_never_uses_eval():
    with pytest.raises(C.ParseError):
        C.evaluate("__import__('os').system('true')")
    assert C.evaluate("(1+2)*3") == (9, [1, 2, 3])


@pytest.mark.parametrize("name", ["countdown", "countdown_tiny"])
def test_countdown_generated_solvable_and_disjoint(name):
    train, test = get_task(name, split="train", n=1000), get_task(name, split="test")
    for s in list(test.samples)[:100]:
        assert test.verify(s, s.target).status == "correct"
        assert 3 <= len(s.metadata["numbers"]) <= 4
    key = lambda s: (tuple(sorted(s.metadata["numbers"])), s.metadata["target"])  # noqa: E731
    assert not {key(s) for s in train.samples} & {key(s) for s in test.samples}
