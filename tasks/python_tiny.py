"""Tiny Python from input/output examples (code family, CPU default): `python_tiny`.

The prompt shows four examples of an integer function and opens its definition; the
completion is the returned expression, run in the sandbox on every input 0..12 (the shown
examples and nine hidden ones):
    prompt  "# f(1)=5 f(3)=11 f(4)=14 f(9)=29\\ndef f(x): return "    target  "3*x+2"
Train and test are disjoint by INSTANCE: the function's behaviour on 0..12 together with
the four shown examples picks the split, so no test prompt (and no other spelling of it) is
seen in training, while the library of functions is shared: the task is to tell from four
examples which function of the library is meant, as countdown shares its numbers across
splits. The instances of one target function cluster (`cluster=target_function`: the test set of
768 instances holds 207 functions in tiny-full, 217 in its exploratory run), and the tables resample by
function. (v1 split by function alone; the tiny model then scored 0 % on test after SFT: a
constant never seen, as in `4*x`, is out of its reach, and RL had no reward to work with.) Fields for held-out rows:
`examples` (list of [x, y], shown) and optional `tests` (list of [x, y], all checked;
default: the examples). RL's dense reward (`train.reward=dense`) is the fraction of those
cases a wrong program passes, counted in the same sandbox run (rewards.codecheck.counting_tests).
"""

from __future__ import annotations

import json
import random

from daca_bench.registry import register_task
from daca_bench.rewards.codecheck import CodeVerifier, counting_tests
from daca_bench.rewards.scoring import HASH_SPLITS, LazySamples, field, hash_split, stable_seed
from daca_bench.types import Sample, Task

VERSION = 4  # 4: the test counts its passed cases (for the dense reward; verdicts unchanged); 3: a dev split (12.5 % of keys) carved from train, test unchanged; 2: split by instance (function + shown examples), not by function
DOMAIN = range(0, 13)
SHOWN = 4

# (spelling with {a} {b} {k} placeholders, the function itself); constants a, b in 1-9, k in 2-5
TEMPLATES = [
    ("x+{a}", lambda x, a, b, k: x + a),
    ("x-{a}", lambda x, a, b, k: x - a),
    ("{a}-x", lambda x, a, b, k: a - x),
    ("{a}*x", lambda x, a, b, k: a * x),
    ("{a}*x+{b}", lambda x, a, b, k: a * x + b),
    ("{a}*x-{b}", lambda x, a, b, k: a * x - b),
    ("x*x", lambda x, a, b, k: x * x),
    ("x*x+{a}", lambda x, a, b, k: x * x + a),
    ("x*x-x", lambda x, a, b, k: x * x - x),
    ("x*(x+{a})", lambda x, a, b, k: x * (x + a)),
    ("(x+{a})*{b}", lambda x, a, b, k: (x + a) * b),
    ("x//{k}", lambda x, a, b, k: x // k),
    ("x%{k}", lambda x, a, b, k: x % k),
    ("x//{k}+{a}", lambda x, a, b, k: x // k + a),
    ("abs(x-{a})", lambda x, a, b, k: abs(x - a)),
    ("max(x,{a})", lambda x, a, b, k: max(x, a)),
    ("min(x,{a})", lambda x, a, b, k: min(x, a)),
    ("-x", lambda x, a, b, k: -x),
    ("x**3", lambda x, a, b, k: x**3),
]


def render_prompt(examples: list[tuple[int, int]], entry: str = "f") -> str:
    shown = " ".join(f"{entry}({x})={y}" for x, y in examples)
    return f"# {shown}\ndef {entry}(x): return "


def _tests(pairs: list[tuple[int, int]], entry: str) -> str:
    return counting_tests(entry + "({})", pairs)


def _sample(name: str, ident: str, shown, checked, target: str, entry: str = "f") -> Sample:
    prompt = render_prompt(shown, entry)
    return Sample(
        id=ident,
        prompt=prompt,
        target=target,
        metadata={
            "prefix": prompt,
            "preamble": "",
            "entry_point": entry,
            "test": _tests(checked, entry),
            "examples": [list(p) for p in shown],
            "tests": [list(p) for p in checked],
        },
    )


def _pairs(raw) -> list[tuple[int, int]]:
    if isinstance(raw, str):
        raw = json.loads(raw)
    pairs = [(int(x), int(y)) for x, y in raw]
    if not pairs:
        raise ValueError("no examples")
    return pairs


def from_record(row: dict, index: int) -> Sample:
    shown = _pairs(field(row, "examples"))
    checked = _pairs(row["tests"]) if row.get("tests") else shown
    entry = str(row.get("entry_point") or "f")
    if not entry.isidentifier():
        raise ValueError(f"entry_point {entry!r} is not a Python name")
    return _sample(
        "python_tiny", f"python_tiny/{row.get('id', index)}", shown, checked, str(row.get("target") or ""), entry
    )


def _generate(split: str, n: int, seed: int) -> list[Sample]:
    rng = random.Random(stable_seed("python_tiny", split, seed))
    samples, seen = [], set()
    for _ in range(1000 * n):
        if len(samples) >= n:
            break
        spelling, fn = rng.choice(TEMPLATES)
        a, b, k = rng.randint(1, 9), rng.randint(1, 9), rng.randint(2, 5)
        expr = spelling.format(a=a, b=b, k=k)
        behaviour = tuple(fn(x, a, b, k) for x in DOMAIN)
        shown = sorted((x, behaviour[x]) for x in rng.sample(list(DOMAIN), SHOWN))
        key = (behaviour, tuple(shown))
        if key in seen or hash_split(f"python/{key}") != split:
            continue
        seen.add(key)
        ident = "python_tiny/" + " ".join(f"{x}:{y}" for x, y in shown) + f"/{expr}"
        samples.append(_sample("python_tiny", ident, shown, list(zip(DOMAIN, behaviour)), expr))
    if len(samples) < n:
        raise RuntimeError(f"python_tiny: only {len(samples)} distinct {split} samples, {n} asked")
    return samples


def target_function(sample: Sample) -> str | None:
    """The cluster of an instance: its target function (the tables pair and resample by it, since the
    instances of one function, shown other examples, succeed or fail together); None: its own."""
    return sample.target or None


@register_task(
    "python_tiny",
    family="code",
    version=VERSION,
    splits=HASH_SPLITS,
    tiny=True,
    cluster=target_function,
    description="tiny Python: an integer expression from four I/O examples, run in the sandbox",
)
def python_tiny(
    split: str = "test",
    n: int | None = None,
    seed: int = 0,
    *,
    records=None,
    timeout: float = 5.0,
    shaping: str | None = None,
) -> Task:
    if records is not None:
        samples = [from_record(row, i) for i, row in enumerate(records)]
    else:
        count = n if n is not None else (256 if split != "train" else 4096)
        samples = LazySamples(count, lambda: _generate(split, count, seed))
    return Task("python_tiny", "code", VERSION, samples, CodeVerifier(timeout, shaping), split)
