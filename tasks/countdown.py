"""Countdown (constraint family): `countdown` (3-4 numbers up to 99) and `countdown_tiny` (three
numbers up to 15, CPU default). Reach the target with + - * / and parentheses, using every
given number exactly once.

Instances are generated from a random expression tree (so always solvable; every
intermediate value a positive integer), deduplicated, and split by instance (sorted numbers +
target), so no test instance is seen in training. Scoring parses the expression itself (no
eval) and checks it in exact rational arithmetic. Fields: `numbers` (or `nums`), `target`.
    daca-bench verify countdown --input completions.jsonl --output scored.jsonl
"""
from __future__ import annotations

import json
import random
import re
from collections import Counter
from fractions import Fraction

from daca_bench.registry import register_task
from daca_bench.rewards.answers import tagged
from daca_bench.rewards.scoring import (
    LazySamples,
    correct_if,
    d1_countdown,
    field,
    HASH_SPLITS,
    hash_split,
    no_answer,
    stable_seed,
    with_shaping,
    wrong,
)
from daca_bench.types import Reward, Sample, Task

VERSION = 2  # 2: a dev split (12.5 % of keys) carved from train; test unchanged
PROMPT = ("Using the numbers {numbers}, write an expression that equals {target}. Use each number "
          "exactly once and only + - * / and parentheses. Put the expression inside <answer></answer>.\n")
TINY_PROMPT = "use {numbers} to make {target}\n"
MAX_TOKENS = 64
_TOKEN = re.compile(r"\s*(?:(\d+)|([-+*/()]))")
_RUN = re.compile(r"[\d\s+\-*/()]+")


class ParseError(ValueError):
    pass


# ---- expressions: tokenizer, recursive-descent parser, exact evaluation ---------------------
def _tokens(text: str) -> list[str]:
    text = text.replace("\u00d7", "*").replace("\u00f7", "/").replace("\u2212", "-").strip()
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ParseError(f"unexpected character {text[pos:].lstrip()[:1]!r}")
        out.append(m.group(1) or m.group(2))
        pos = m.end()
        if len(out) > MAX_TOKENS:
            raise ParseError("expression too long")
    return out


def evaluate(text: str) -> tuple[Fraction, list[int]]:
    """(exact value, numbers used in order). ParseError for anything outside the grammar
    expr := term (('+'|'-') term)* ; term := factor (('*'|'/') factor)* ; factor := INT | '(' expr ')'.
    Unary signs are not allowed; ZeroDivisionError for a division by zero."""
    toks, pos, used = _tokens(text), 0, []

    def peek():
        return toks[pos] if pos < len(toks) else None

    def factor() -> Fraction:
        nonlocal pos
        tok = peek()
        if tok is None:
            raise ParseError("expression ends too early")
        pos += 1
        if tok == "(":
            value = expr()
            if peek() != ")":
                raise ParseError("unbalanced parenthesis")
            pos += 1
            return value
        if tok.isdigit():
            used.append(int(tok))
            return Fraction(int(tok))
        raise ParseError(f"unexpected {tok!r}" + (" (unary signs are not allowed)" if tok in "+-" else ""))

    def term() -> Fraction:
        nonlocal pos
        value = factor()
        while peek() in ("*", "/"):
            op = toks[pos]
            pos += 1
            rhs = factor()
            value = value * rhs if op == "*" else value / rhs
        return value

    def expr() -> Fraction:
        nonlocal pos
        value = term()
        while peek() in ("+", "-"):
            op = toks[pos]
            pos += 1
            rhs = term()
            value = value + rhs if op == "+" else value - rhs
        return value

    if not toks:
        raise ParseError("empty expression")
    value = expr()
    if pos != len(toks):
        raise ParseError(f"unexpected {toks[pos]!r}")
    return value, used


def find_expression(text: str) -> str | None:
    """The last run of expression characters that holds a digit and an operator (so the
    `= 24` of `3*8 = 24` is left out); else the last run with a digit; else None."""
    runs = [r.strip() for r in _RUN.findall(text.replace("\u00d7", "*").replace("\u00f7", "/").replace("\u2212", "-"))]
    runs = [r for r in runs if any(c.isdigit() for c in r)]
    with_op = [r for r in runs if re.search(r"\d\s*[-+*/]|[-+*/]\s*[\d(]|\)\s*[-+*/]", r)]
    return (with_op or runs or [None])[-1]


# ---- scoring -----------------------------------------------------------------------------
def verify(sample: Sample, completion: str) -> Reward:
    numbers, target = sample.metadata["numbers"], Fraction(sample.metadata["target"])
    inner = tagged(completion)
    if inner == "":
        return no_answer(rule="empty_tag")
    expression = find_expression(completion if inner is None else inner)
    if expression is None:
        return wrong("no_expression") if inner else no_answer(rule="none")
    try:
        value, used = evaluate(expression)
    except ParseError as exc:
        return wrong("unparseable", error=str(exc), expression=expression)
    except ZeroDivisionError:
        return wrong("division_by_zero", expression=expression)
    if Counter(used) != Counter(numbers):
        return wrong("numbers_not_used_once", expression=expression, used=used)
    return correct_if(value == target, expression=expression, value=str(value))


def partial(sample: Sample, completion: str, reward: Reward) -> float:
    """Dense training credit: half for using the given numbers (multiset overlap), half for how
    close the value comes to the target, scaled by that overlap (writing the target alone earns 0)."""
    expression = reward.details.get("expression")
    if expression is None:
        return 0.0
    try:
        value, used = evaluate(expression)
    except (ParseError, ZeroDivisionError):
        return 0.0
    numbers, target = sample.metadata["numbers"], Fraction(sample.metadata["target"])
    overlap = sum((Counter(used) & Counter(numbers)).values()) / max(len(numbers), len(used))
    close = max(0.0, 1.0 - abs(float(value - target)) / max(1.0, abs(float(target))))
    return 0.5 * overlap + 0.5 * overlap * close


def _verifier(shaping: str | None):
    return with_shaping(verify, shaping, partial=partial, d1=d1_countdown)


def parse_numbers(raw) -> list[int]:
    if isinstance(raw, str):
        raw = json.loads(raw) if raw.strip().startswith("[") else re.findall(r"-?\d+", raw)
    numbers = [int(x) for x in raw]
    if not 2 <= len(numbers) <= 8:
        raise ValueError(f"countdown needs 2-8 numbers, got {len(numbers)}")
    return numbers


# ---- generation ----------------------------------------------------------------------------
_PREC = {"+": 1, "-": 1, "*": 2, "/": 2}


def _show(node) -> str:
    if isinstance(node, int):
        return str(node)
    op, left, right = node
    def wrap(child, right_side):
        if isinstance(child, int):
            return str(child)
        tighter = _PREC[child[0]] < _PREC[op] or (right_side and _PREC[child[0]] == _PREC[op] and op in "-/")
        return f"({_show(child)})" if tighter else _show(child)
    return f"{wrap(left, False)}{op}{wrap(right, True)}"


def _random_tree(numbers: list[int], rng: random.Random):
    """Combine the numbers pairwise in random order; None if an intermediate goes non-positive
    or fractional. Returns (value, tree)."""
    pool = [(x, x) for x in numbers]
    while len(pool) > 1:
        (a, ta), (b, tb) = pool.pop(rng.randrange(len(pool))), pool.pop(rng.randrange(len(pool)))
        op = rng.choice("+-*/")
        if op == "-" and a < b or op == "/" and (b == 0 or a % b):
            (a, ta), (b, tb) = (b, tb), (a, ta)
        value = {"+": a + b, "-": a - b, "*": a * b, "/": a // b if b and a % b == 0 else None}[op]
        if value is None or value <= 0:
            return None
        pool.append((value, (op, ta, tb)))
    return pool[0]


def _generate(name, split, n_samples, seed, counts, num_range, target_range, tiny) -> list[Sample]:
    rng = random.Random(stable_seed(name, split, seed))
    samples, seen = [], set()
    for _ in range(2000 * n_samples):
        if len(samples) >= n_samples:
            break
        numbers = [rng.randint(*num_range) for _ in range(rng.choice(counts))]
        made = _random_tree(numbers, rng)
        if made is None or not target_range[0] <= made[0] <= target_range[1]:
            continue
        target, tree = made
        key = f"{' '.join(map(str, sorted(numbers)))}->{target}"
        if key in seen or hash_split(f"countdown/{key}") != split:
            continue
        seen.add(key)
        samples.append(_sample(name, f"{name}/{key}", numbers, target, _show(tree), tiny))
    if len(samples) < n_samples:
        raise RuntimeError(f"{name}: only {len(samples)} distinct {split} instances, {n_samples} asked")
    return samples


def _sample(name, ident, numbers, target, expression, tiny) -> Sample:
    shown = " ".join(map(str, numbers))
    if tiny:
        prompt, target_text = TINY_PROMPT.format(numbers=shown, target=target), expression or ""
    else:
        prompt = PROMPT.format(numbers=shown, target=target)
        target_text = f"<answer>{expression}</answer>" if expression else ""
    return Sample(id=ident, prompt=prompt, target=target_text,
                  metadata={"numbers": list(numbers), "target": int(target)})


def from_record(name: str, row: dict, index: int, tiny: bool) -> Sample:
    numbers = parse_numbers(field(row, "numbers", "nums"))
    target = Fraction(str(field(row, "target")).strip())
    if target.denominator != 1:
        raise ValueError("target must be an integer")
    return _sample(name, f"{name}/{row.get('id', index)}", numbers, int(target), None, tiny)


def _build(name, split, n, seed, records, shaping, tiny, **gen) -> Task:
    reward = _verifier(shaping)
    if records is not None:
        samples = [from_record(name, row, i, tiny) for i, row in enumerate(records)]
    else:
        count = n if n is not None else (256 if split != "train" else 4096)
        samples = LazySamples(count, lambda: _generate(name, split, count, seed, tiny=tiny, **gen))
    return Task(name, "constraint", VERSION, samples, reward, split)


@register_task("countdown", family="constraint", version=VERSION, splits=HASH_SPLITS,
               description="Countdown: 3-4 numbers (1-99) to a target 10-100, exact arithmetic")
def countdown(split: str = "test", n: int | None = None, seed: int = 0, *, records=None,
              shaping: str | None = None) -> Task:
    return _build("countdown", split, n, seed, records, shaping, False,
                  counts=(3, 4), num_range=(1, 99), target_range=(10, 100))


@register_task("countdown_tiny", family="constraint", version=VERSION, splits=HASH_SPLITS, tiny=True,
               description="tiny Countdown: three numbers 1-15 to a target up to 99")
def countdown_tiny(split: str = "test", n: int | None = None, seed: int = 0, *, records=None,
                   shaping: str | None = None) -> Task:
    return _build("countdown_tiny", split, n, seed, records, shaping, True,
                  counts=(3,), num_range=(1, 15), target_range=(1, 99))
