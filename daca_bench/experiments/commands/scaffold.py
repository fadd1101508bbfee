"""`daca-bench new-task NAME`: write a task file and its test from a template, ready to edit.

    daca-bench new-task sort4 --dir my_tasks --test-dir my_tests
    daca-bench tasks --tasks-dir my_tasks --check sort4      # the task battery
    daca-bench tasks --tasks-dir my_tasks --show sort4 --split dev -n 5

The task file is a working task (sort four digits) with everything a task of this benchmark needs:
train / dev / test splits by a hash of its cluster key (no cluster in two splits), a cluster key
the tables resample by, a generator that gives up after a bounded number of draws with an error
naming the split it could not fill, `records=` for `daca-bench verify`, and a verifier built on the
stock scorers of daca_bench/rewards/stock.py (normalised exact match; numeric, pattern and JSON
schema named beside it). The test runs the task battery (daca_bench/rewards/battery.py) and a
table of verdicts. Existing files are never overwritten.
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
as a working task to edit into your own: change _draw (what a prompt asks), CLUSTER (what items share
and are split by) and verify (how an answer is scored); keep the rest.

Record field (for `daca-bench verify $name` and get_task("$name", records=[...])): `digits`.
After each change: daca-bench tasks --check $name (with --tasks-dir and the folder of this file).
"""
from __future__ import annotations

import random

from daca_bench.errors import ConfigError
from daca_bench.registry import register_task
from daca_bench.rewards.scoring import HASH_SPLITS, LazySamples, field, hash_split, stable_seed
from daca_bench.rewards.stock import exact  # also numeric, pattern, json_schema: daca_bench/rewards/stock.py
from daca_bench.types import Sample, Task

NAME = "$name"
FAMILY = "$family"  # math, code, constraint or json: the table block the task's rows go to
VERSION = 1  # bump whenever the samples or the scoring change (results of an older version are not reused)
CLUSTER = "answer"  # the metadata field items cluster on: those sharing it share a split and, in tables, a cluster
TINY = True  # the tiny character model can learn it: ASCII prompts <= 64 characters, gold <= 48 (the battery checks)
SIZES = {"train": 2048, "dev": 128, "test": 256}  # a split's size when n is not given
MAX_DRAWS = 50  # draws per sample asked before the generator gives up: it never loops forever


def _sample(digits: str) -> Sample:
    """One item from its record: the prompt, the gold completion (what SFT trains on), what verify needs."""
    answer = "".join(sorted(digits))
    return Sample(id=f"{NAME}/{digits}", prompt=f"sort {digits}\\n", target=answer, metadata={"answer": answer})


def _draw(rng: random.Random) -> Sample:
    """One random item, drawn with RNG (never the global random: the same seed gives the same samples)."""
    return _sample("".join(rng.choice("0123456789") for _ in range(4)))


def verify(sample: Sample, completion: str):
    """The answer (the last <answer>...</answer>, else the whole completion) equal to the gold once
    case and spaces are normalised; the empty completion is no_answer. For a number or expression use
    numeric(gold, completion), for a format pattern(regex, completion), for JSON json_schema(schema, completion)."""
    return exact(sample.metadata["answer"], completion)


def _generate(split: str, n: int, seed: int) -> list[Sample]:
    """N distinct items of SPLIT: an item belongs to the split its cluster key hashes to (about 62 % train,
    12.5 % dev, 25 % test). Gives up after MAX_DRAWS x N draws, naming the split it could not fill."""
    rng, found = random.Random(stable_seed(NAME, split, seed)), {}
    for _ in range(MAX_DRAWS * n):
        if len(found) == n:
            break
        s = _draw(rng)
        if hash_split(f"{NAME}/{s.metadata[CLUSTER]}") == split:
            found.setdefault(s.id, s)
    if len(found) < n:
        raise ConfigError(f"{NAME}: only {len(found)} distinct {split} samples after {MAX_DRAWS * n} draws, {n} "
                          "asked; ask for fewer (n=) or let _draw make more distinct items")
    return list(found.values())


@register_task(NAME, family=FAMILY, version=VERSION, splits=HASH_SPLITS, tiny=TINY, cluster=CLUSTER,
               description="sort four digits: `sort 3120` -> `0123` (a new task: edit me)")
def build(split: str = "test", n: int | None = None, seed: int = 0, *, records=None) -> Task:
    if records is not None:  # what `daca-bench verify` and reward_function use
        samples = [_sample(str(field(row, "digits"))) for row in records]
    else:
        count = SIZES[split] if n is None else n
        samples = LazySamples(count, lambda: _generate(split, count, seed))
    return Task(NAME, FAMILY, VERSION, samples, verify, split)
''')

TEST = Template('''"""Tests of the task `$name` (written by `daca-bench new-task`): the task battery, the bounded
generator and a table of verdicts; add a case for every rule verify learns."""
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


CASES = [("0123", "correct"), ("<answer> 0123 </answer>", "correct"), ("3120", "wrong"), ("", "no_answer")]


@pytest.mark.parametrize("completion,status", CASES)
def test_verdicts(completion, status):
    task = get_task("$name", records=[{"digits": "3120"}])
    assert task.verify(task.samples[0], completion).status == status
''')


def configure(parser) -> None:
    parser.add_argument("name", help="the task's name (lower case letters, digits, _): the file is NAME.py")
    parser.add_argument("--dir", default="tasks", help="the folder of the task file (default: tasks)")
    parser.add_argument("--test-dir", default="tests", help="the folder of its test, test_task_NAME.py (default: tests)")
    parser.add_argument("--family", choices=registry.FAMILIES, default="constraint",
                        help="the task's family: the table block its rows go to (default: constraint)")


def run(args) -> int:
    task_file, test_file = write(args.name, Path(args.dir), Path(args.test_dir), args.family)
    loaded = {p.resolve() for p in registry._task_dirs() if p.is_dir()}
    where = "" if task_file.parent.resolve() in loaded else f" --tasks-dir {args.dir}"
    print(f"wrote {task_file} (the task: edit _draw, CLUSTER and verify) and {test_file} (its tests)\nnext:\n"
          f"  daca-bench tasks{where} --check {args.name}\n"
          f"  daca-bench tasks{where} --show {args.name} --split dev -n 5\n"
          f"  python -m pytest -q {test_file}")
    return 0


def write(name: str, folder: Path, test_folder: Path, family: str = "constraint") -> tuple[Path, Path]:
    """Write FOLDER/NAME.py and TEST_FOLDER/test_task_NAME.py (refused, one line, where a file exists,
    the name is not a plain identifier or a task of that name or file name is registered)."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise ConfigError(f"{name!r}: a task name is lower case letters, digits and _ (it names the file "
                          "NAME.py and the ids NAME/...), starting with a letter")
    try:
        spec = registry.task_spec(name)
    except UnknownTaskError:
        spec = None
    if spec is not None:
        raise ConfigError(f"{name}: a task of that name is registered already ({registry.task_source(spec)});"
                          " choose another name")
    have = sys.modules.get(f"daca_bench_tasks.{name}")
    if have is not None:
        raise ConfigError(f"{name}: a task file named {name}.py is loaded already ({have.__file__}); "
                          "choose another name")
    task_file, test_file = folder / f"{name}.py", test_folder / f"test_task_{name}.py"
    for path in (task_file, test_file):
        if path.exists():
            raise ConfigError(f"{name}: {path} exists; new-task never overwrites a file: choose another "
                              "name or folder, or delete it")
    folder.mkdir(parents=True, exist_ok=True)
    test_folder.mkdir(parents=True, exist_ok=True)
    rel = os.path.relpath(task_file.resolve(), test_folder.resolve()).replace(os.sep, "/")
    task_file.write_text(TASK.substitute(name=name, family=family), encoding="utf-8")
    test_file.write_text(TEST.substitute(name=name, task_file=rel), encoding="utf-8")
    return task_file, test_file
