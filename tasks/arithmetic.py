"""Tiny synthetic math family: short integer expressions such as `17+5-9=`, answered with the number.
Only + and - of non-negative integers (no *, /, parentheses or signs); anything else is bad input.
Two sizes: `arithmetic` (2-3 operands up to 30: the tiny model's SFT stalls near 6 %, out of RL's
reach) and `arithmetic_tiny` (2 operands up to 30: what tiny-full's math row uses).

Train and test are disjoint by expression (a hash of the expression picks the split).
Scoring follows the shared math rule (daca_bench.rewards.answers.math_answer: tag, boxed, ####, last
number) with exact number comparison. Field for held-out rows: `expression` (or `prompt`,
e.g. `17+5-9=`), optional `answer`.
    daca-bench tasks --family math
"""

from __future__ import annotations

import random
import re

from daca_bench.registry import register_task
from daca_bench.rewards.mathcheck import score_math
from daca_bench.rewards.scoring import HASH_SPLITS, digit_credit, field, hash_split, with_shaping
from daca_bench.types import Reward, Sample, Task

VERSION = 3  # 3: a dev split (12.5 % of keys) carved from train, test unchanged; 2: shared answer extraction (a minus glued to a digit is an operator, not a sign)
MAX_OPERAND = 30


def _split_of(expr: str) -> str:
    return hash_split(expr)  # ~25% test (sha256 of the expression, first byte < 64)


def _expression(rng: random.Random, operands=(2, 3)) -> str:
    n = rng.choice(operands)
    parts = [str(rng.randint(0, MAX_OPERAND))]
    for _ in range(n - 1):
        parts += [rng.choice("+-"), str(rng.randint(0, MAX_OPERAND))]
    return "".join(parts)


def _value(expr: str) -> int:
    tokens = re.findall(r"\d+|[+-]", expr)
    total, sign = 0, 1
    for tok in tokens:
        if tok in "+-":
            sign = 1 if tok == "+" else -1
        else:
            total += sign * int(tok)
    return total


def verify(sample: Sample, completion: str) -> Reward:
    return score_math(str(sample.metadata["answer"]), completion)


def partial(sample: Sample, completion: str, reward: Reward) -> float:
    """Dense training credit: the digits of the answer that agree with the gold number."""
    return digit_credit(str(sample.metadata["answer"]), reward.details.get("answer"))


def _verifier(shaping: str | None):
    return with_shaping(verify, shaping, partial=partial)  # no d1 shaping: d1's format terms need <reasoning> tags


def _sample(expr: str, answer: int, name: str = "arithmetic") -> Sample:
    return Sample(
        id=f"{name}/{expr}", prompt=f"{expr}=", target=str(answer), metadata={"expression": expr, "answer": answer}
    )


def from_record(row: dict, name: str = "arithmetic") -> Sample:
    expr = str(field(row, "expression", "prompt")).strip().rstrip("=").replace(" ", "")
    if not re.fullmatch(r"\d+(?:[+-]\d+)*", expr):
        raise ValueError(
            f"not a +/- integer expression (arithmetic takes non-negative integers joined by + and - only): {expr!r}"
        )
    answer = _value(expr)
    if row.get("answer") is not None and int(row["answer"]) != answer:
        raise ValueError(f"answer {row['answer']!r} does not match {expr} = {answer}")
    return _sample(expr, answer, name)


def _build(name: str, operands: tuple, split: str, n: int | None, seed: int, records, shaping: str | None) -> Task:
    if records is not None:
        return Task(name, "math", VERSION, [from_record(r, name) for r in records], _verifier(shaping), split)
    n = n or (256 if split != "train" else 4096)
    rng = random.Random(f"{name}-{seed}")
    seen: dict[str, Sample] = {}
    for _ in range(200 * n):
        if len(seen) >= n:
            break
        expr = _expression(rng, operands)
        if expr in seen or _split_of(expr) != split:
            continue
        seen[expr] = _sample(expr, _value(expr), name)
    return Task(name, "math", VERSION, list(seen.values()), _verifier(shaping), split)


@register_task(
    "arithmetic",
    family="math",
    version=VERSION,
    splits=HASH_SPLITS,
    tiny=True,
    description="tiny integer expressions (2-3 operands up to 30), answer is the number",
)
def arithmetic(
    split: str = "test", n: int | None = None, seed: int = 0, *, records=None, shaping: str | None = None
) -> Task:
    return _build("arithmetic", (2, 3), split, n, seed, records, shaping)


@register_task(
    "arithmetic_tiny",
    family="math",
    version=VERSION,
    splits=HASH_SPLITS,
    tiny=True,
    description="tiny integer sums and differences of two operands up to 30, answer is the number",
)
def arithmetic_tiny(
    split: str = "test", n: int | None = None, seed: int = 0, *, records=None, shaping: str | None = None
) -> Task:
    """Two operands (1,922 expressions: about 510 test, 240 dev and 1,170 train): the size at which the tiny
    model's SFT gets off the floor, so that RL has correct samples to reward."""
    return _build("arithmetic_tiny", (2,), split, n, seed, records, shaping)
