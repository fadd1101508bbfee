"""`daca-bench new-task NAME`: write a task file and its test from a template, ready to edit.

    daca-bench new-task sort4 --dir my_tasks --test-dir my_tests
    daca-bench tasks --tasks-dir my_tasks --check sort4      # the task battery
    daca-bench tasks --tasks-dir my_tasks --show sort4 --split dev -n 5

The task file is a working task (sort four digits) shaped so that three places make a task and
only they change: `_draw` (one item as its record: prompt, answer and the fields verify needs),
`CLUSTER` (the record field items cluster and split on) and `verify` (built on the stock scorers of
daca_bench/rewards/stock.py). The rest is generic: train / dev / test splits by a hash of the cluster
key, a generator that gives up after a bounded number of draws naming the split it could not fill,
`records=` for `daca-bench verify` (the same records). The test runs the task battery
(daca_bench/rewards/battery.py) and a table of verdicts derived from the task's own samples (its gold,
another item's gold, nothing), so it holds for a task of other fields. Existing files are never overwritten.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from string import Template

from ... import registry
from ...errors import ConfigError, UnknownTaskError

TASK = Template('''"""$name: sort the digits of a four-digit string ($family family). Written by `daca-bench new-task`
as a working task to edit into your own. Three places make a task, and only they change:

    _draw    one random item as its record: `prompt` (what the model reads), `answer` (the gold
             completion SFT trains on) and any field verify needs (here `digits`)
    CLUSTER  the record field items cluster on: those sharing it share a split and, in tables, a cluster
    verify   how a completion is scored (a stock scorer of daca_bench/rewards/stock.py, or your own:
             correct 1, wrong / no_answer 0; partial credit only with partial_credit=True below)

The records _draw returns are also what `daca-bench verify $name` and get_task("$name", records=[...])
read; the test (written beside) derives its cases from the task. After each change:
daca-bench tasks --check $name (with --tasks-dir and the folder of this file).
"""
from __future__ import annotations

import hashlib
import random

from daca_bench.errors import ConfigError
from daca_bench.registry import register_task
from daca_bench.rewards.scoring import HASH_SPLITS, LazySamples, field, hash_split, stable_seed
from daca_bench.rewards.stock import exact  # also numeric, pattern, json_schema: daca_bench/rewards/stock.py
from daca_bench.types import Sample, Task

NAME = "$name"
FAMILY = "$family"  # math, code, constraint or json: the table block the task's rows go to
VERSION = 1  # bump whenever the samples or the scoring change (results of an older version are not reused)
CLUSTER = "answer"  # the record field items cluster on: those sharing it share a split and, in tables, a cluster
PARTIAL_CREDIT = False  # True where verify gives a wrong answer a value between 0 and 1 (accuracy still counts correct)
TINY = True  # the tiny character model can learn it: ASCII prompts <= 64 characters, gold <= 48 (the battery checks)
SIZES = {"train": 2048, "dev": 128, "test": 256}  # a split's size when n is not given
MAX_DRAWS = 50  # draws per sample asked before the generator gives up: it never loops forever


def _draw(rng: random.Random) -> dict:
    """One random item's record, drawn with RNG (never the global random: the same seed gives the same samples)."""
    digits = "".join(rng.choice("0123456789") for _ in range(4))
    return {"prompt": f"sort {digits}\\n", "answer": "".join(sorted(digits)), "digits": digits}


def verify(sample: Sample, completion: str):
    """The answer (the last <answer>...</answer>, else the whole completion) equal to the gold once
    case and spaces are normalised; the empty completion is no_answer. For a number or expression use
    numeric(gold, completion), for a format pattern(regex, completion), for JSON json_schema(schema, completion).
    sample.metadata is the item's record."""
    return exact(sample.metadata["answer"], completion)


# ---- nothing below needs editing ---------------------------------------------------------------
def _sample(record: dict) -> Sample:
    """An item from its record (_draw's, or a user's for `daca-bench verify`): id from the prompt's text."""
    prompt, answer = str(field(record, "prompt")), str(field(record, "answer"))
    text = "_".join(prompt.split())
    key = text if len(text) <= 40 else f"{text[:24]}-{hashlib.sha256(prompt.encode()).hexdigest()[:12]}"
    return Sample(id=f"{NAME}/{key}", prompt=prompt, target=answer, metadata=dict(record))


def _generate(split: str, n: int, seed: int) -> list[Sample]:
    """N distinct items of SPLIT: an item belongs to the split its cluster key hashes to (about 62 % train,
    12.5 % dev, 25 % test). Gives up after MAX_DRAWS x N draws, naming the split it could not fill."""
    rng, found = random.Random(stable_seed(NAME, split, seed)), {}
    for _ in range(MAX_DRAWS * n):
        if len(found) == n:
            break
        s = _sample(_draw(rng))
        if hash_split(f"{NAME}/{s.metadata[CLUSTER]}") == split:
            found.setdefault(s.id, s)
    if len(found) < n:
        raise ConfigError(f"{NAME}: only {len(found)} distinct {split} samples after {MAX_DRAWS * n} draws, {n} "
                          "asked; ask for fewer (n=) or let _draw make more distinct items")
    return list(found.values())


@register_task(NAME, family=FAMILY, version=VERSION, splits=HASH_SPLITS, tiny=TINY, cluster=CLUSTER,
               partial_credit=PARTIAL_CREDIT, description=f"{NAME}: a task of one's own (new-task)")
def build(split: str = "test", n: int | None = None, seed: int = 0, *, records=None) -> Task:
    if records is not None:  # what `daca-bench verify` and reward_function use
        samples = [_sample(row) for row in records]
    else:
        count = SIZES[split] if n is None else n
        samples = LazySamples(count, lambda: _generate(split, count, seed))
    return Task(NAME, FAMILY, VERSION, samples, verify, split)
''')

TEST = Template('''"""Tests of the task `$name` (written by `daca-bench new-task`): the task battery, the bounded
generator and a table of verdicts derived from the task's own samples; add a case for every rule verify learns."""
import sys
from pathlib import Path

import pytest

from daca_bench.errors import ConfigError
from daca_bench.registry import get_task, load_file, task_spec
from daca_bench.rewards.battery import battery

load_file(Path(__file__).resolve().parent / "$task_file")  # registers $name wherever the tests run


def test_the_task_passes_the_battery():
    failed = [c for c in battery(task_spec("$name")) if not c.ok]
    assert not failed, "; ".join(f"{c.name}: {' / '.join(c.problems)}" for c in failed)


def test_a_split_that_cannot_be_filled_is_an_error_not_a_hang(monkeypatch):
    monkeypatch.setattr(sys.modules["daca_bench_tasks.$name"], "MAX_DRAWS", 1)  # fewer draws than samples asked
    with pytest.raises(ConfigError, match="distinct test samples"):
        list(get_task("$name", split="test", n=64).samples)


def _cases():
    """(a test item's record, [(completion, status)]): its gold, its gold in tags, another item's gold, nothing."""
    samples = list(get_task("$name", split="test", n=16).samples)
    first = samples[0]
    other = next(s.target for s in samples if s.target.strip() != first.target.strip())
    return dict(first.metadata), [(first.target, "correct"), (f"<answer>{first.target}</answer>", "correct"),
                                  (other, "wrong"), ("", "no_answer")]


RECORD, CASES = _cases()


@pytest.mark.parametrize("completion,status", CASES)
def test_verdicts(completion, status):
    task = get_task("$name", records=[RECORD])
    assert task.verify(task.samples[0], completion).status == status
''')


def configure(parser) -> None:
    parser.add_argument("name", help="the task's name (lower case letters, digits, _): the file is NAME.py")
    parser.add_argument("--dir", default="tasks", help="the folder of the task file (default: tasks)")
    parser.add_argument(
        "--test-dir", default="tests", help="the folder of its test, test_task_NAME.py (default: tests)"
    )
    parser.add_argument(
        "--family",
        choices=registry.FAMILIES,
        default="constraint",
        help="the task's family: the table block its rows go to (default: constraint)",
    )


def run(args) -> int:
    task_file, test_file = write(args.name, Path(args.dir), Path(args.test_dir), args.family)
    loaded = {p.resolve() for p in registry._task_dirs() if p.is_dir()}
    where = "" if task_file.parent.resolve() in loaded else f" --tasks-dir {args.dir}"
    print(
        f"wrote {task_file} (the task: edit _draw, CLUSTER and verify, nothing else) and {test_file} (its tests, "
        f"derived from the task)\nnext:\n"
        f"  daca-bench tasks{where} --check {args.name}\n"
        f"  daca-bench tasks{where} --show {args.name} --split dev -n 5\n"
        f"  python -m pytest -q {test_file}"
    )
    return 0


def write(name: str, folder: Path, test_folder: Path, family: str = "constraint") -> tuple[Path, Path]:
    """Write FOLDER/NAME.py and TEST_FOLDER/test_task_NAME.py (refused, one line, where a file exists,
    the name is not a plain identifier or a task of that name or file name is registered)."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise ConfigError(
            f"{name!r}: a task name is lower case letters, digits and _ (it names the file "
            "NAME.py and the ids NAME/...), starting with a letter"
        )
    try:
        spec = registry.task_spec(name)
    except UnknownTaskError:
        spec = None
    if spec is not None:
        raise ConfigError(
            f"{name}: a task of that name is registered already ({registry.task_source(spec)}); choose another name"
        )
    have = sys.modules.get(f"daca_bench_tasks.{name}")
    if have is not None:
        raise ConfigError(
            f"{name}: a task file named {name}.py is loaded already ({have.__file__}); choose another name"
        )
    task_file, test_file = folder / f"{name}.py", test_folder / f"test_task_{name}.py"
    for path in (task_file, test_file):
        if path.exists():
            raise ConfigError(
                f"{name}: {path} exists; new-task never overwrites a file: choose another name or folder, or delete it"
            )
    folder.mkdir(parents=True, exist_ok=True)
    test_folder.mkdir(parents=True, exist_ok=True)
    rel = os.path.relpath(task_file.resolve(), test_folder.resolve()).replace(os.sep, "/")
    task_file.write_text(TASK.substitute(name=name, family=family), encoding="utf-8")
    test_file.write_text(TEST.substitute(name=name, task_file=rel), encoding="utf-8")
    return task_file, test_file
