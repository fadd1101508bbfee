"""Countdown (constraint family): `countdown` (3-4 numbers up to 99) and `countdown_tiny` (three
numbers up to 15, CPU default). Reach the target with + - * / and parentheses, using every
given number exactly once.

Instances are generated from a random expression tree (so always solvable; every
intermediate value a positive integer), deduplicated, and split by instance (sorted numbers +
target), so no test instance is seen in training. Scoring parses the expression itself (no
eval) and checks it in exact rational arithmetic. Fields: `numbers` (or `nums`), `target`.
    daca-bench verify countdown --input completions.jsonl --output scored.jsonl

`countdown_d1` is d1's benchmark (docs/paper-presets.md): three-number instances, the test set
d1's own file (not on the hub, not shipped: $DACA_BENCH_D1_DATA or path=) drawn as d1 draws it,
the train set d1's (the three-number rows of Jiayi-Pan/Countdown-Tasks-3to4), d1's prompts
(a `\\boxed{}` expression at test time), d1's rewards under shaping="d1" and d1's verdict beside
ours in details["d1"].
"""

from __future__ import annotations

import ast
import json
import operator
import random
import re
from collections import Counter
from fractions import Fraction

from daca_bench.loaders import (
    d1_file,
    d1_test_draw,
    d1_train_rows,
    load_rows,
    read_d1_countdown,
)
from daca_bench.registry import protocol_wording, register_task
from daca_bench.rewards.answers import d1_boxed, d1_first_tag, d1_last_tag, d1_plain, last_boxed, tagged
from daca_bench.rewards.scoring import (
    HASH_SPLITS,
    LazySamples,
    correct_if,
    d1_countdown,
    d1_metric,
    field,
    hash_split,
    no_answer,
    stable_seed,
    with_shaping,
    wrong,
)
from daca_bench.types import Reward, Sample, Task

VERSION = 2  # 2: a dev split (12.5 % of keys) carved from train; test unchanged
PROMPT = (
    "Using the numbers {numbers}, write an expression that equals {target}. Use each number "
    "exactly once and only + - * / and parentheses. Put the expression inside <answer></answer>.\n"
)
TINY_PROMPT = "use {numbers} to make {target}\n"
MAX_TOKENS = 64
_TOKEN = re.compile(r"\s*(?:(\d+)|([-+*/()]))")
_RUN = re.compile(r"[\d\s+\-*/()]+")


class ParseError(ValueError):
    pass


# ---- expressions: tokenizer, recursive-descent parser, exact evaluation ---------------------
_LATEX_OPS = (("\\times", "*"), ("\\cdot", "*"), ("\\div", "/"), ("\u00d7", "*"), ("\u00f7", "/"), ("\u2212", "-"))


def plain_operators(text: str) -> str:
    """LaTeX and Unicode operators (`\\times`, `\\div`, `\\cdot`, U+00D7, U+00F7, U+2212) as + - * /."""
    for old, new in _LATEX_OPS:
        text = text.replace(old, new)
    return text


def _tokens(text: str) -> list[str]:
    text = plain_operators(text).strip()
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
    runs = [r.strip() for r in _RUN.findall(plain_operators(text))]
    runs = [r for r in runs if any(c.isdigit() for c in r)]
    with_op = [r for r in runs if re.search(r"\d\s*[-+*/]|[-+*/]\s*[\d(]|\)\s*[-+*/]", r)]
    return (with_op or runs or [None])[-1]


# ---- scoring -----------------------------------------------------------------------------
def verify(sample: Sample, completion: str) -> Reward:
    numbers, target = sample.metadata["numbers"], Fraction(sample.metadata["target"])
    inner = tagged(completion)
    if inner == "":
        return no_answer(rule="empty_tag")
    text = completion if inner is None else inner
    expression = find_expression(last_boxed(text) or text)  # a \boxed{} expression wins (d1's prompts ask for one)
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
    return Sample(
        id=ident, prompt=prompt, target=target_text, metadata={"numbers": list(numbers), "target": int(target)}
    )


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


@register_task(
    "countdown",
    family="constraint",
    version=VERSION,
    splits=HASH_SPLITS,
    description="Countdown: 3-4 numbers (1-99) to a target 10-100, exact arithmetic",
)
def countdown(
    split: str = "test", n: int | None = None, seed: int = 0, *, records=None, shaping: str | None = None
) -> Task:
    return _build(
        "countdown", split, n, seed, records, shaping, False, counts=(3, 4), num_range=(1, 99), target_range=(10, 100)
    )


@register_task(
    "countdown_tiny",
    family="constraint",
    version=VERSION,
    splits=HASH_SPLITS,
    tiny=True,
    description="tiny Countdown: three numbers 1-15 to a target up to 99",
)
def countdown_tiny(
    split: str = "test", n: int | None = None, seed: int = 0, *, records=None, shaping: str | None = None
) -> Task:
    return _build(
        "countdown_tiny", split, n, seed, records, shaping, True, counts=(3,), num_range=(1, 15), target_range=(1, 99)
    )


# ---- d1's protocol (dllm-reasoning/d1) ------------------------------------------------------
# d1 checks an answer by evaluating it as Python arithmetic. The same value is computed here
# from the syntax tree (numbers, + - * / // **, unary signs; nothing else), never with eval.
_D1_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
}
_D1_ALLOWED = re.compile(r"^[\d+\-*/().\s]+$")


def d1_value(text: str):
    """What d1 gets evaluating `text` (its characters limited to digits, + - * / ( ) . and
    spaces); None where d1's evaluation fails."""
    if not _D1_ALLOWED.match(text):
        return None

    def walk(node):
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
            value = walk(node.operand)
            return value if isinstance(node.op, ast.UAdd) else -value
        if isinstance(node, ast.BinOp) and type(node.op) in _D1_OPS:
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > 64 and abs(left) > 1:
                raise OverflowError("power too large")  # d1 would compute for ever; never the target
            return _D1_OPS[type(node.op)](left, right)
        raise ValueError("not arithmetic")

    try:
        return walk(ast.parse(text.strip(), mode="eval"))
    except (SyntaxError, ValueError, TypeError, ZeroDivisionError, OverflowError, RecursionError):
        return None


def _d1_uses_numbers(text: str, numbers) -> bool:
    return sorted(int(x) for x in re.findall(r"\d+", text)) == sorted(numbers)


def _d1_hits(value, target) -> bool:
    try:
        return value is not None and abs(value - target) < 1e-5
    except (TypeError, OverflowError):
        return False


def d1_eval_correct(numbers, target, completion: str) -> bool:
    """d1's evaluation verdict: the last `\\boxed{}` (the first <answer> pair, else the whole text,
    when the box does not close; the whole text when there is no box), LaTeX operators mapped,
    a trailing `= number` cut, every given number used once, the value within 1e-5 of the target."""
    expression = d1_boxed(completion)
    if expression is None:
        expression = d1_first_tag(completion)
        expression = completion if expression is None else expression
    expression = expression.replace("\\div", "/").replace("\\times", "*").replace("\\cdot", "*")
    m = re.search(r"([0-9+\-*/() ]+)=[0-9. ]+", expression)
    if m:
        expression = m.group(1).strip()
    return _d1_uses_numbers(expression, numbers) and _d1_hits(d1_value(expression), target)


def d1_train_value(numbers, target, completion: str) -> float:
    """d1's countdown training reward: 1.0 right, 0.1 for a tagged answer that is not, 0 without one."""
    expression = d1_last_tag(d1_plain(completion))
    if expression is None:
        return 0.0
    if not _d1_uses_numbers(expression, numbers):
        return 0.1
    return 1.0 if _d1_hits(d1_value(expression), target) else 0.1


D1_LAYOUT = "\nAnswer in exactly this layout:\n<reasoning>\n...\n</reasoning>\n<answer>\n...\n</answer>\n"
D1_TRAIN = (
    "{layout}\nWith only the numbers {numbers}, write an arithmetic expression whose value is exactly "
    "{target}. Use every number in the list exactly once, with +, -, * and / as needed. After your "
    "reasoning, give only the expression inside <answer></answer> tags, with no equals sign and no target. "
    "For example, for the numbers [2, 3, 4] and the target 5, a valid answer is: <answer>\n2*4-3\n</answer>"
)
D1_TEST_SYSTEM = (
    "With only the numbers given, write an arithmetic expression whose value is exactly the target. "
    "Use +, -, * and / as needed and every number exactly once. Reason step by step. After your "
    "reasoning, give only the final expression inside \\boxed{}, with no equals sign and no target, "
    "for example \\boxed{a + b * c}. Answer in exactly this layout:\n<reasoning>\nyour reasoning\n"
    "</reasoning>\n<answer>\n\\boxed{...}\n</answer>"
)
D1_PREFILL = "<reasoning>"
D1_TRAIN_HUB = "Jiayi-Pan/Countdown-Tasks-3to4"


def _d1_prompt(split: str, numbers: list[int], target: int) -> str:
    if split == "test":
        return (
            protocol_wording("d1", "countdown_d1", split, D1_TEST_SYSTEM) + f"\n\nNumbers: {numbers}\nTarget: {target}"
        )
    return D1_TRAIN.format(
        layout=protocol_wording("d1", "countdown_d1", split, D1_LAYOUT), numbers=numbers, target=target
    )


def _d1_gold(numbers: list[int], target: int) -> str:
    """A solution for the gold check (d1's files hold none): every order and pair of operators of the
    numbers, both groupings, checked with this module's exact evaluator; "" when there is none."""
    import itertools

    for a, b, c in itertools.permutations(numbers):
        for p, q in itertools.product("+-*/", repeat=2):
            for text in (f"({a}{p}{b}){q}{c}", f"{a}{p}({b}{q}{c})"):
                try:
                    if evaluate(text)[0] == target:
                        return f"<answer>\\boxed{{{text}}}</answer>"
                except (ValueError, ZeroDivisionError):
                    continue
    return ""


@register_task(
    "countdown_d1",
    family="constraint",
    version=VERSION,
    description="d1's 3-number Countdown (test file via path / $DACA_BENCH_D1_DATA): ours and d1's verdict",
)
def countdown_d1(
    split: str = "test", n: int | None = None, seed: int = 0, *, records=None, path=None, shaping: str | None = None
) -> Task:
    """`seed` is not used: d1's test draw and train shuffle have their own seed (42)."""
    if shaping not in (None, "d1"):
        raise ValueError(f"this task has no {shaping!r} shaping")
    if records is not None:
        rows = [
            {"numbers": parse_numbers(field(r, "numbers", "nums")), "target": int(field(r, "target"))}
            for r in list(records)[:n]
        ]
    elif split == "test":
        rows = d1_test_draw(read_d1_countdown(d1_file("countdown/test", path)), n, 256)
    else:
        rows = [
            {"numbers": [int(x) for x in field(r, "nums", "numbers")], "target": int(r["target"])}
            for r in load_rows(D1_TRAIN_HUB, split="train", path=path)
        ]
        rows = d1_train_rows([r for r in rows if len(r["numbers"]) == 3], 500)[:n]
    samples = [
        Sample(
            f"countdown_d1/{split}/{i}",
            _d1_prompt(split, r["numbers"], r["target"]),
            _d1_gold(r["numbers"], r["target"]),
            {"numbers": r["numbers"], "target": r["target"], **({"prefill": D1_PREFILL} if split == "test" else {})},
        )
        for i, r in enumerate(rows)
    ]

    def d1_verify(sample: Sample, completion: str) -> Reward:
        reward = verify(sample, completion)
        numbers, target = sample.metadata["numbers"], sample.metadata["target"]
        return d1_metric(reward, d1_eval_correct(numbers, target, completion))

    def d1_shaped(sample: Sample, completion: str) -> Reward:
        reward = d1_verify(sample, completion)
        value = d1_train_value(sample.metadata["numbers"], sample.metadata["target"], completion)
        return Reward(value, reward.status, {**reward.details, "shaping": "d1"})

    return Task("countdown_d1", "constraint", VERSION, samples, d1_shaped if shaping == "d1" else d1_verify, split)
