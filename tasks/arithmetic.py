"""Tiny synthetic math family: short integer expressions such as `17+5-9=`, answered with the number.

Train and test are disjoint by expression (a hash of the expression picks the split).
    daca-bench tasks --family math
"""
from __future__ import annotations

import hashlib
import random
import re

from daca_bench.registry import register_task
from daca_bench.types import CORRECT, NO_ANSWER, WRONG, Reward, Sample, Task

VERSION = 1
MAX_OPERAND = 30


def _split_of(expr: str) -> str:
    return "test" if hashlib.sha256(expr.encode()).digest()[0] < 64 else "train"  # ~25% test


def _expression(rng: random.Random) -> str:
    n = rng.choice((2, 3))
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
    numbers = re.findall(r"-?\d+", completion)
    if not numbers:
        return Reward(0.0, NO_ANSWER, {})
    got = int(numbers[-1])
    ok = got == int(sample.metadata["answer"])
    return Reward(float(ok), CORRECT if ok else WRONG, {"parsed": got})


@register_task("arithmetic", family="math", version=VERSION, tiny=True,
               description="tiny integer expressions (2-3 operands up to 30), answer is the number")
def arithmetic(split: str = "test", n: int | None = None, seed: int = 0, **_) -> Task:
    n = n or (256 if split == "test" else 4096)
    rng = random.Random(f"arithmetic-{seed}")
    seen: dict[str, Sample] = {}
    for _ in range(200 * n):
        if len(seen) >= n:
            break
        expr = _expression(rng)
        if expr in seen or _split_of(expr) != split:
            continue
        answer = _value(expr)
        seen[expr] = Sample(id=f"arithmetic/{expr}", prompt=f"{expr}=", target=str(answer),
                            metadata={"expression": expr, "answer": answer})
    return Task("arithmetic", "math", VERSION, list(seen.values()), verify, split)
