"""Sudoku (constraint family): `sudoku` (4x4 and 9x9) and `sudoku_tiny` (4x4, CPU default).

Puzzles are generated from seeds, each with a unique solution. Train and test are disjoint
BY SOLUTION GRID: a hash of the solved grid picks its split, so no test grid is ever seen in
training (d1's 4x4 test set shared grids with its training set); puzzles of one grid are one
cluster for the tables' intervals (`cluster="solution"`). Field `puzzle`: row-major
digits as a string (`0` or `.` blank; `_ * ?` too; whitespace, commas, bars ignored) or a list (flat or nested).
Scoring: 1 iff the answer is a complete valid grid that keeps every given; the fraction of
blank cells filled correctly is in details (and is the reward under shaping="d1").
    daca-bench tasks --family constraint

`sudoku_d1` is d1's benchmark (docs/paper-presets.md): 4x4 puzzles from d1's own CSV files
(not on the hub, not shipped: $DACA_BENCH_D1_DATA or path=), the puzzle as one 16-digit string
in d1's prompt layout, 256 test puzzles drawn as d1 draws them, our whole-grid verdict as the
reward and d1's cell accuracy (correct blank cells / blank cells, pooled) as details["d1"].
"""

from __future__ import annotations

import random
import re
from functools import cache

from daca_bench.loaders import d1_file, d1_test_draw, d1_train_rows, read_d1_sudoku
from daca_bench.registry import protocol_wording, register_task
from daca_bench.rewards.answers import d1_last_tag, d1_plain, digit_run, tagged
from daca_bench.rewards.scoring import (
    HASH_SPLITS,
    LazySamples,
    bad_input,
    correct_if,
    d1_metric,
    d1_sudoku,
    field,
    hash_split,
    no_answer,
    stable_seed,
    with_shaping,
    wrong,
)
from daca_bench.types import Reward, Sample, Task

VERSION = 2  # 2: a dev split (12.5 % of keys) carved from train; test unchanged
BOX = {4: 2, 9: 3}
BLANKS = "0._*?"  # accepted blank marks in a puzzle (0 and . are the usual ones)
PROMPT = (
    "Solve this {n}x{n} Sudoku. Replace every 0 with a digit 1-{n} so that each row, column "
    "and {b}x{b} box holds each digit once. Give the {n} solved rows inside <answer></answer>."
    "\n\n{rows}\n"
)
TINY_PROMPT = "sudoku {rows}\n"


# ---- grids -------------------------------------------------------------------------------
def parse_puzzle(puzzle) -> tuple[int, list[int]]:
    """(N, N*N cells with 0 for blank) from a string or a (nested) list; ValueError otherwise."""
    if isinstance(puzzle, str):
        cells = [0 if ch in BLANKS else int(ch) for ch in puzzle if ch.isdigit() or ch in BLANKS]
    elif isinstance(puzzle, (list, tuple)):
        flat = [c for row in puzzle for c in row] if puzzle and isinstance(puzzle[0], (list, tuple)) else list(puzzle)
        cells = [0 if c in (None, 0, "", *BLANKS) else int(c) for c in flat]
    else:
        raise ValueError(f"puzzle must be a string or a list, not {type(puzzle).__name__}")
    n = {16: 4, 81: 9}.get(len(cells))
    if n is None:
        raise ValueError(f"puzzle has {len(cells)} cells; expected 16 (4x4) or 81 (9x9)")
    if any(not 0 <= c <= n for c in cells):
        raise ValueError(f"puzzle digits must be 0-{n}")
    return n, cells


def _units(n: int) -> list[list[int]]:
    b = BOX[n]
    rows = [[r * n + c for c in range(n)] for r in range(n)]
    cols = [[r * n + c for r in range(n)] for c in range(n)]
    boxes = [
        [(br + r) * n + bc + c for r in range(b) for c in range(b)] for br in range(0, n, b) for bc in range(0, n, b)
    ]
    return rows + cols + boxes


@cache
def _peers(n: int) -> tuple[tuple[int, ...], ...]:
    units = _units(n)
    return tuple(tuple(sorted({p for u in units if i in u for p in u} - {i})) for i in range(n * n))


def is_valid_solution(n: int, cells: list[int]) -> bool:
    full = set(range(1, n + 1))
    return all({cells[i] for i in unit} == full for unit in _units(n))


def solve(n: int, cells: list[int], limit: int = 2, rng: random.Random | None = None) -> list[list[int]]:
    """Up to `limit` solutions (bitmask backtracking, fewest-candidates cell first)."""
    peers, full = _peers(n), (1 << (n + 1)) - 2
    grid = list(cells)
    for i, v in enumerate(grid):  # the givens must not already clash
        if v and any(grid[p] == v for p in peers[i]):
            return []
    out: list[list[int]] = []

    def search():
        best, best_opts = -1, None
        for i, v in enumerate(grid):
            if v == 0:
                used = 0
                for p in peers[i]:
                    used |= 1 << grid[p]
                opts = full & ~used
                if best_opts is None or bin(opts).count("1") < bin(best_opts).count("1"):
                    best, best_opts = i, opts
                    if opts == 0:
                        return
        if best < 0:
            out.append(list(grid))
            return
        digits = [d for d in range(1, n + 1) if best_opts >> d & 1]
        if rng is not None:
            rng.shuffle(digits)
        for d in digits:
            grid[best] = d
            search()
            if len(out) >= limit:
                break
        grid[best] = 0

    search()
    return out


@cache
def _all_4x4() -> tuple[str, ...]:
    return tuple("".join(map(str, g)) for g in solve(4, [0] * 16, limit=10_000))


def split_of_grid(solution: str) -> str:
    return hash_split(f"sudoku-grid/{solution}")


def _random_grid(n: int, split: str, rng: random.Random) -> str:
    if n == 4:
        return rng.choice([g for g in _all_4x4() if split_of_grid(g) == split])
    while True:
        grid = "".join(map(str, solve(9, [0] * 81, limit=1, rng=rng)[0]))
        if split_of_grid(grid) == split:
            return grid


def make_puzzle(solution: str, blanks: int, rng: random.Random) -> str:
    """Blank cells in random order while the solution stays unique (may stop short of `blanks`)."""
    n = int(len(solution) ** 0.5)
    cells = [int(c) for c in solution]
    removed = 0
    for i in rng.sample(range(n * n), n * n):
        if removed >= blanks:
            break
        keep, cells[i] = cells[i], 0
        if len(solve(n, cells, limit=2)) == 1:
            removed += 1
        else:
            cells[i] = keep
    return "".join(map(str, cells))


# ---- scoring ------------------------------------------------------------------------------
def verify(sample: Sample, completion: str) -> Reward:
    n, givens = sample.metadata["size"], [int(c) for c in sample.metadata["puzzle"]]
    inner = tagged(completion)
    if inner == "":
        return no_answer(rule="empty_tag")
    grid = digit_run(completion if inner is None else inner, n * n)
    if grid is None:
        return wrong("no_grid") if inner else no_answer(rule="none")
    cells = [int(c) for c in grid]
    changed = sum(1 for g, c in zip(givens, cells) if g and g != c)
    valid = is_valid_solution(n, cells)
    blanks = [i for i, g in enumerate(givens) if g == 0]
    if changed == 0 and valid:
        return correct_if(True, givens_changed=0, valid=True, blank_fraction_correct=1.0, answer=grid)
    solution = sample.metadata.get("solution") or _reference(n, givens)
    if solution is None:
        return bad_input("puzzle has no solution")
    right = sum(1 for i in blanks if cells[i] == int(solution[i]))
    return correct_if(
        False,
        givens_changed=changed,
        valid=valid,
        answer=grid,
        blank_fraction_correct=right / len(blanks) if blanks else 1.0,
    )


def _reference(n: int, givens: list[int]) -> str | None:
    found = solve(n, givens, limit=1)
    return "".join(map(str, found[0])) if found else None


def _rows(cells: str, n: int, sep: str) -> str:
    return sep.join(cells[r * n : (r + 1) * n] for r in range(n))


def _sample(name: str, ident: str, n: int, puzzle: str, solution: str | None, tiny: bool) -> Sample:
    if tiny:
        prompt, target = TINY_PROMPT.format(rows=_rows(puzzle, n, " ")), solution or ""
    else:
        prompt = PROMPT.format(n=n, b=BOX[n], rows=_rows(puzzle, n, "\n"))
        target = f"<answer>\n{_rows(solution, n, chr(10))}\n</answer>" if solution else ""
    return Sample(id=ident, prompt=prompt, target=target, metadata={"size": n, "puzzle": puzzle, "solution": solution})


def from_record(name: str, row: dict, index: int, tiny: bool) -> Sample:
    n, cells = parse_puzzle(field(row, "puzzle", "quizzes", "question"))
    puzzle = "".join(map(str, cells))
    solution = row.get("solution")
    if solution is not None:
        sn, scells = parse_puzzle(solution)
        if sn != n or 0 in scells or not is_valid_solution(n, scells):
            raise ValueError("solution is not a complete valid grid of the puzzle's size")
        solution = "".join(map(str, scells))
        if any(p and p != s for p, s in zip(cells, scells)):
            raise ValueError("solution does not keep the puzzle's givens")
    elif not solve(n, cells, limit=1):
        raise ValueError("puzzle has no solution")
    return _sample(name, f"{name}/{row.get('id', index)}", n, puzzle, solution, tiny)


def _generate(
    name: str,
    split: str,
    n_samples: int,
    seed: int,
    sizes: tuple[int, ...],
    blanks: dict[int, tuple[int, int]],
    tiny: bool,
) -> list[Sample]:
    rng = random.Random(stable_seed(name, split, seed))
    samples, seen = [], set()
    while len(samples) < n_samples:
        n = sizes[len(samples) % len(sizes)]
        solution = _random_grid(n, split, rng)
        puzzle = make_puzzle(solution, rng.randint(*blanks[n]), rng)
        if puzzle in seen:
            continue
        seen.add(puzzle)
        samples.append(_sample(name, f"{name}/{puzzle}", n, puzzle, solution, tiny))
    return samples


def _build(name, split, n, seed, records, sizes, blanks, shaping, tiny, default_n) -> Task:
    reward = _verifier(shaping)
    if records is not None:
        samples = [from_record(name, row, i, tiny) for i, row in enumerate(records)]
    else:
        count = n if n is not None else default_n[split]
        samples = LazySamples(count, lambda: _generate(name, split, count, seed, sizes, blanks, tiny))
    return Task(name, "constraint", VERSION, samples, reward, split)


def partial(sample: Sample, completion: str, reward: Reward) -> float:
    """Dense training credit: the fraction of blank cells filled correctly (d1's sudoku reward)."""
    return float(reward.details.get("blank_fraction_correct", 0.0))


def _verifier(shaping: str | None):
    return with_shaping(verify, shaping, partial=partial, d1=d1_sudoku)


@register_task(
    "sudoku",
    family="constraint",
    version=VERSION,
    splits=HASH_SPLITS,
    cluster="solution",
    description="4x4 and 9x9 Sudoku with unique solutions; splits disjoint by solution grid",
)
def sudoku(
    split: str = "test",
    n: int | None = None,
    seed: int = 0,
    *,
    records=None,
    sizes: tuple[int, ...] = (4, 9),
    shaping: str | None = None,
) -> Task:
    sizes = tuple(sizes)
    if not sizes or any(s not in BOX for s in sizes):
        raise ValueError(f"sizes must be drawn from {tuple(BOX)}")
    return _build(
        "sudoku",
        split,
        n,
        seed,
        records,
        sizes,
        {4: (6, 10), 9: (40, 50)},
        shaping,
        False,
        {"train": 2048, "dev": 256, "test": 256},
    )


@register_task(
    "sudoku_tiny",
    family="constraint",
    version=VERSION,
    splits=HASH_SPLITS,
    tiny=True,
    cluster="solution",
    description="tiny 4x4 Sudoku: prompt `sudoku 1030 ...`, answer the 16 digits",
)
def sudoku_tiny(
    split: str = "test", n: int | None = None, seed: int = 0, *, records=None, shaping: str | None = None
) -> Task:
    return _build(
        "sudoku_tiny",
        split,
        n,
        seed,
        records,
        (4,),
        {4: (4, 10)},
        shaping,
        True,
        {"train": 4096, "dev": 256, "test": 256},
    )


# ---- d1's protocol (dllm-reasoning/d1): its 4x4 files, prompt layout, cell accuracy ----------
# The system prompt gives d1's rules and layout in this project's words (d1's text is not copied;
# $DACA_BENCH_D1_PROMPTS swaps in a user's copy, daca_bench.registry.protocol_wording).
D1_SYSTEM = (
    "\nSolve the 4x4 Sudoku puzzle below. It is given as one 16-character string, read left to right "
    "and top to bottom, with '0' for an empty cell.\n\nRules:\n- Fill every empty cell with a digit "
    "from 1 to 4\n- Every row holds the digits 1-4 exactly once\n- Every column holds the digits 1-4 "
    "exactly once\n- Every 2x2 box holds the digits 1-4 exactly once\n\nYour final answer must be the "
    "WHOLE solved grid as one 16-character string of the digits 1-4.\n\nAnswer in exactly this layout:\n"
    "<reasoning>\nhow you solved it, step by step\n</reasoning>\n<answer>\n[the 16-character solution, "
    "no spaces or separators]\n</answer>\n"
)
D1_QUESTION = "Solve the following Sudoku puzzle: {puzzle}\n"
D1_PREFILL = "<reasoning>"
# d1's evaluation reading, tried in this order (the first that yields non-blank text wins)
_D1_END = r"(?:<\|eot_id\|>|<\|endoftext\|>"
D1_PATTERNS = [
    re.compile(p, re.DOTALL)
    for p in (
        r"<answer>.*?```\s*([\d\s]+)```",
        r"<answer>(.*?)" + _D1_END + r"|</answer>)",
        r"</answer>\s*(.*?)" + _D1_END + r"|$)",
        r".*?(\d{16})\s*</answer>",
        r"\b(\d{16})\b",
    )
]


def _d1_cells(grid: str, puzzle: str, solution: str) -> int:
    """Blank cells of `puzzle` where `grid` (cut or padded with 0 to 16) holds the solution's digit."""
    grid = (grid + "0" * 16)[:16]
    return sum(1 for i, c in enumerate(puzzle) if c == "0" and grid[i] == solution[i])


def d1_eval_grid(completion: str) -> str:
    """d1's evaluation reading of a Sudoku answer (whitespace removed; "" when none). The decoded
    completion ends at the first EOS, which d1's text spells `<|endoftext|>`: it is put back."""
    text = completion + "<|endoftext|>"
    for pattern in D1_PATTERNS:
        m = pattern.search(text)
        if m and m.group(1).strip():
            return re.sub(r"\s", "", m.group(1).strip())
    return ""


def d1_train_reward(sample: Sample, completion: str, reward: Reward) -> Reward:
    """d1's Sudoku training reward: the share of blank cells right in the last <answer> pair's digits."""
    if not reward.scored:
        return reward
    tagged_text = d1_last_tag(d1_plain(completion))
    puzzle, solution = sample.metadata["puzzle"], sample.metadata["solution"]
    blanks = puzzle.count("0")
    digits = "".join(ch for ch in tagged_text if ch.isdigit()) if tagged_text is not None else ""
    value = _d1_cells(digits, puzzle, solution) / blanks if digits and blanks else 0.0
    return Reward(value, reward.status, {**reward.details, "shaping": "d1"})


@register_task(
    "sudoku_d1",
    family="constraint",
    version=VERSION,
    cluster="solution",
    description="d1's 4x4 Sudoku files (path / $DACA_BENCH_D1_DATA): whole-grid and d1's cell accuracy",
)
def sudoku_d1(
    split: str = "test", n: int | None = None, seed: int = 0, *, records=None, path=None, shaping: str | None = None
) -> Task:
    """`seed` is not used: d1's draw of the test puzzles and its train shuffle have their own seed (42)."""
    if shaping not in (None, "d1"):
        raise ValueError(f"this task has no {shaping!r} shaping")
    if records is None:
        rows = read_d1_sudoku(d1_file(f"sudoku/{split}", path))
        rows = d1_test_draw(rows, n, 256) if split == "test" else d1_train_rows(rows, 500)[:n]
    else:
        rows = list(records)[:n]
    system = protocol_wording("d1", "sudoku_d1", split, D1_SYSTEM)
    samples = []
    for row in rows:
        puzzle, solution = str(row["puzzle"]), str(row["solution"])
        meta = {
            "size": 4,
            "puzzle": puzzle,
            "solution": solution,
            **({"prefill": D1_PREFILL} if split == "test" else {}),
        }
        samples.append(
            Sample(
                f"sudoku_d1/{split}/{puzzle}",
                system + "\n\n" + D1_QUESTION.format(puzzle=puzzle),
                f"<answer>\n{solution}\n</answer>",
                meta,
            )
        )

    def d1_verify(sample: Sample, completion: str) -> Reward:
        reward = verify(sample, completion)
        if not reward.scored:
            return reward
        puzzle = sample.metadata["puzzle"]
        return d1_metric(
            reward, _d1_cells(d1_eval_grid(completion), puzzle, sample.metadata["solution"]), puzzle.count("0")
        )

    def d1_shaped(sample: Sample, completion: str) -> Reward:
        return d1_train_reward(sample, completion, d1_verify(sample, completion))

    return Task("sudoku_d1", "constraint", VERSION, samples, d1_shaped if shaping == "d1" else d1_verify, split)
