"""The task battery: what every task must pass. tests/unit/rewards/test_tasks_battery.py runs it on every
registered task, `daca-bench tasks --check NAME` on any one (a file of tasks/, a folder given by
--tasks-dir or DACA_BENCH_TASKS, an installed plug-in).

    from daca_bench.rewards.battery import battery
    for check in battery(task_spec("sort4")):
        print(check.name, "ok" if check.ok else "; ".join(check.problems))

Each check returns the problems it found (none: it passes): the spec is complete; the gold
completion of every sample scores 1 (`correct`) on each split; the empty completion is
`no_answer`; every status scores its value (correct 1; wrong, no_answer, timeout 0 unless the task
declares partial credit, then in [0, 1]) on gold, near-gold and junk completions; the verifier never
raises on junk; ids are unique, stable over two builds and prefixed with the task's name, metadata
is JSON; the splits share no id; verification is deterministic; a tiny family fits the tiny
character model (ASCII prompts of at most 64 characters, gold completions of at most 48). The checks
call the task's own verifier (types.CheckedVerify.inner), so a value it must not give is reported, not
raised. An exception a task raises is a problem of the check that met it, never a crash of the battery.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from itertools import combinations

from ..registry import FAMILIES, TaskSpec
from ..types import STATUSES, Reward, reward_problem

N = 6  # samples per split the checks score
TINY_PROMPT, TINY_TARGET = 64, 48  # the tiny character model's room (characters)
PROBES = ["<answer>1</answer>", "garbage 12 {", "```python\nx = 1\n```"]
JUNK = PROBES + [
    "",
    " ",
    "\n\n",
    "<answer></answer>",
    "<answer>",
    "}{][",
    "0" * 200,
    "\u00e9\u4e2d\x00",
    "-1e999",
    "nan",
]


@dataclass
class Check:
    name: str
    what: str
    problems: list[str] = field(default_factory=list)
    skipped: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems


def _build(spec: TaskSpec, split: str, n: int, kw: dict):
    return spec.build(split=split, n=n, seed=0, **kw)


def _own(task):
    """The task's own verifier, unchecked (a registered task's is wrapped in types.CheckedVerify)."""
    return getattr(task.verify, "inner", task.verify)


def _verify_all(task, samples, completions):
    verify = _own(task)
    if hasattr(verify, "batch"):
        return verify.batch(samples, completions)
    return [verify(s, c) for s, c in zip(samples, completions)]


def near(gold: str) -> list[str]:
    """Completions close to a gold one: every digit one lower, one higher, the first half, the text reversed."""
    down = "".join(str((int(c) - 1) % 10) if c.isdigit() else c for c in gold)
    up = "".join(str((int(c) + 1) % 10) if c.isdigit() else c for c in gold)
    return [c for c in dict.fromkeys([down, up, gold[: len(gold) // 2], gold[::-1]]) if c != gold]


def _splits(spec: TaskSpec, kw: dict) -> tuple[str, ...]:
    """The splits to score: every one, or with a data file (KW: path=...) the last only (the file's)."""
    return spec.splits[-1:] if kw else spec.splits


def check_spec(spec: TaskSpec, kw: dict | None = None) -> list[str]:
    out = []
    if spec.family not in FAMILIES:
        out.append(f"family {spec.family!r} is not one of {', '.join(FAMILIES)}")
    if not isinstance(spec.version, int) or spec.version < 1:
        out.append(f"version {spec.version!r} is not an integer >= 1")
    if not spec.splits:
        out.append("no splits")
    if not spec.description:
        out.append("no description (register_task(description=...) or the builder's docstring)")
    return out


def check_gold(spec: TaskSpec, kw: dict | None = None, n: int = N) -> list[str]:
    out = []
    for split in _splits(spec, kw or {}):
        task = _build(spec, split, n, kw or {})
        if (task.name, task.family, task.version) != (spec.name, spec.family, spec.version):
            out.append(
                f"{split}: the Task says {task.name}/{task.family}/v{task.version}, the registration "
                f"{spec.name}/{spec.family}/v{spec.version}"
            )
        samples = list(task.samples)
        if not 0 < len(samples) <= n:
            out.append(f"{split}: {len(samples)} samples where n={n} was asked")
        golds = [s for s in samples if s.target]
        if not golds:
            out.append(f"{split}: no sample has a gold target (Sample.target) to check")
        for s, r in zip(golds, _verify_all(task, golds, [s.target for s in golds])):
            if r.status not in STATUSES:
                out.append(f"{s.id}: status {r.status!r} is not one of {', '.join(STATUSES)}")
            elif (r.status, r.value) != ("correct", 1.0):
                out.append(f"{s.id}: its gold target {s.target[:40]!r} scores {r.status} {r.value} {dict(r.details)}")
    return out


def check_empty(spec: TaskSpec, kw: dict | None = None, n: int = N) -> list[str]:
    split = _splits(spec, kw or {})[-1]
    task = _build(spec, split, n, kw or {})
    samples = list(task.samples)
    return [
        f"{s.id}: the empty completion scores {r.status} {r.value}, not no_answer 0"
        for s, r in zip(samples, _verify_all(task, samples, [""] * len(samples)))
        if (r.status, r.value) != ("no_answer", 0.0)
    ]


def check_ids(spec: TaskSpec, kw: dict | None = None, n: int = N, prefix: bool = True) -> list[str]:
    kw = kw or {}
    split = spec.splits[-1] if kw else ("test" if "test" in spec.splits else spec.splits[0])
    a, b = _build(spec, split, n, kw), _build(spec, split, n, kw)
    ids = [s.id for s in a.samples]
    out = [f"{split}: id {i!r} is not unique" for i in sorted({i for i in ids if ids.count(i) > 1})]
    if [(s.id, s.prompt, s.target) for s in a.samples] != [(s.id, s.prompt, s.target) for s in b.samples]:
        out.append(
            f"{split}: two builds with the same seed differ (ids, prompts or targets): draw with a seeded "
            "random.Random (rewards.scoring.stable_seed), never the global one"
        )
    for s in a.samples:
        if prefix and not s.id.startswith(spec.name + "/"):
            out.append(f"id {s.id!r} does not start with {spec.name + '/'!r}")
        try:
            json.dumps(dict(s.metadata))
        except (TypeError, ValueError) as exc:
            out.append(f"{s.id}: metadata is not JSON ({exc})")
    return out[:10]


def check_disjoint(spec: TaskSpec, kw: dict | None = None, n: int = 50) -> list[str]:
    if kw or len(spec.splits) < 2:
        return []
    ids = {split: {s.id for s in spec.build(split=split, n=n).samples} for split in spec.splits}
    return [
        f"{a} and {b} share {len(ids[a] & ids[b])} id(s), e.g. {sorted(ids[a] & ids[b])[0]!r}: split by a hash "
        "of what must not leak (rewards.scoring.hash_split)"
        for a, b in combinations(spec.splits, 2)
        if ids[a] & ids[b]
    ]


def _try(verify, sample, completion):
    """verify(sample, completion), or the exception it raised (check_junk reports those)."""
    try:
        return verify(sample, completion)
    except Exception as exc:  # noqa: BLE001
        return exc


def check_deterministic(spec: TaskSpec, kw: dict | None = None, n: int = N) -> list[str]:
    task = _build(spec, spec.splits[-1] if kw else spec.splits[0], n, kw or {})
    samples = list(task.samples) + [task.samples[0]] * len(PROBES)
    probes = [s.target for s in task.samples] + PROBES
    verify = _own(task)
    once = [_try(verify, s, c) for s, c in zip(samples, probes)]
    twice = [_try(verify, s, c) for s, c in zip(samples, probes)]
    return [
        f"{s.id}: {c[:30]!r} scores {r1.status} {r1.value}, then {r2.status} {r2.value}"
        for s, c, r1, r2 in zip(samples, probes, once, twice)
        if not isinstance(r1, Exception)
        and not isinstance(r2, Exception)
        and (r1.status != r2.status or not ((math.isnan(r1.value) and math.isnan(r2.value)) or r1.value == r2.value))
    ]


def check_values(spec: TaskSpec, kw: dict | None = None, n: int = N) -> list[str]:
    """Each status's value (types.reward_problem) on every sample's gold, near-gold, empty and probe completions."""
    task = _build(spec, spec.splits[-1] if kw else spec.splits[0], n, kw or {})
    pairs = [(s, c) for s in task.samples for c in [s.target, *near(s.target or ""), "", *PROBES]]
    verify, out = _own(task), []
    rewards = (
        _verify_all(task, [s for s, _ in pairs], [c for _, c in pairs])
        if hasattr(verify, "batch")
        else [_try(verify, s, c) for s, c in pairs]
    )
    for (s, c), r in zip(pairs, rewards):
        if isinstance(r, Exception):
            continue  # check_junk's
        if not isinstance(r, Reward):
            out.append(f"{s.id}: {c[:30]!r} returns {type(r).__name__}, not a Reward")
            continue
        problem = reward_problem(r, spec.partial_credit, spec.shaped_range)
        if problem:
            out.append(f"{s.id}: {c[:30]!r} scores {r.status} {r.value}: the value {problem}")
    return list(dict.fromkeys(out))[:10]


def check_junk(spec: TaskSpec, kw: dict | None = None, n: int = N) -> list[str]:
    """The verifier returns a Reward (wrong, no_answer, bad_input...) for junk completions, never an exception."""
    task = _build(spec, spec.splits[-1] if kw else spec.splits[0], n, kw or {})
    sample, verify, out = task.samples[0], _own(task), []
    for c in JUNK:
        r = _try(verify, sample, c)
        if isinstance(r, Exception):
            out.append(
                f"{c[:30]!r} raises {type(r).__name__}: {' '.join(str(r).split())[:120]} (a completion it "
                "cannot read is wrong or no_answer: rewards.scoring.wrong / no_answer)"
            )
        elif not hasattr(r, "status"):
            out.append(f"{c[:30]!r} returns {type(r).__name__}, not a Reward")
    return out


def check_lengths(spec: TaskSpec, kw: dict | None = None, n: int = 300) -> list[str]:
    out = []
    for split in [s for s in ("train", "test") if s in spec.splits]:
        for s in spec.build(split=split, n=n).samples:
            if not (s.prompt.isascii() and len(s.prompt) <= TINY_PROMPT):
                out.append(f"{s.id}: prompt {s.prompt[:40]!r} is not ASCII of at most {TINY_PROMPT} characters")
            if not (s.target and s.target.isascii() and len(s.target) <= TINY_TARGET):
                out.append(f"{s.id}: target {s.target[:40]!r} is not ASCII of 1 to {TINY_TARGET} characters")
    return out[:10]


CHECKS = {  # name -> (what it checks, function)
    "spec": ("family, version, splits and description registered", check_spec),
    "gold": ("each split's gold completions score 1 (correct)", check_gold),
    "empty": ("the empty completion is no_answer (0)", check_empty),
    "ids": ("ids unique, stable over two builds, prefixed NAME/; metadata is JSON", check_ids),
    "disjoint": ("no id in two splits", check_disjoint),
    "values": (
        "each status scores its value: correct 1; wrong, no_answer, timeout 0 (or partial credit "
        "in [0, 1], where the task declares it)",
        check_values,
    ),
    "junk": ("the verifier never raises on junk completions", check_junk),
    "deterministic": ("the same completion scores the same twice", check_deterministic),
    "lengths": (f"tiny: ASCII prompts <= {TINY_PROMPT} and gold <= {TINY_TARGET} characters", check_lengths),
}


def run_check(name: str, spec: TaskSpec, kw: dict | None = None, **options) -> Check:
    """One check of CHECKS on SPEC (KW: the builder's options, e.g. path= of a data file); an exception
    the task raises is its problem (one line), and a check that does not apply is skipped."""
    what, fn = CHECKS[name]
    if name == "lengths" and not spec.tiny:
        return Check(name, what, skipped="not a tiny family (sft and train check lengths against the model's canvas)")
    if name == "disjoint" and (kw or len(spec.splits) < 2):
        return Check(name, what, skipped="one split only" if len(spec.splits) < 2 else "a data file's split only")
    try:
        return Check(name, what, fn(spec, kw, **options))
    except Exception as exc:  # noqa: BLE001 - a task that raises fails this check, the battery goes on
        return Check(name, what, [f"raised {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"])


def battery(spec: TaskSpec, kw: dict | None = None) -> list[Check]:
    """Every check of CHECKS on SPEC, in order."""
    return [run_check(name, spec, kw) for name in CHECKS]
