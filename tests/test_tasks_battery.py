"""One battery over EVERY registered task: gold completions score 1, the empty string is
no_answer, ids are unique and stable, scoring is deterministic, sample metadata is JSON, and
the tiny families fit a tiny character model. A new task passes this battery or says why;
a task whose data lives on the hub lists its offline fixture in FIXTURE_KW."""
import json
import math
from pathlib import Path

import pytest
import sandbox_double

from daca_bench.registry import FAMILIES, list_tasks
from daca_bench.rewards import codecheck
from daca_bench.types import STATUSES

FIX = Path(__file__).parent / "fixtures"
FIXTURE_KW = {"gsm8k": {"path": FIX / "gsm8k.jsonl"}, "math500": {"path": FIX / "math500.jsonl"},
              "mbpp": {"path": FIX / "mbpp.jsonl"},
              # d1's protocol tasks on files this project wrote in d1's formats (d1's data is not shipped)
              "gsm8k_d1": {"path": FIX / "gsm8k.jsonl"}, "math500_d1": {"path": FIX / "math500.jsonl"},
              "sudoku_d1": {"path": FIX / "d1_sudoku.csv"}, "countdown_d1": {"path": FIX / "d1_countdown.jsonl"}}
N = 6
SPECS = list_tasks()


@pytest.fixture(autouse=True)
def host_double():
    codecheck.use_backend(sandbox_double)  # code tasks: gold must pass, in a host subprocess here
    yield
    codecheck.use_backend(None)


def _build(spec, split):
    kw = FIXTURE_KW.get(spec.name, {})
    return spec.build(split=split, n=N, seed=0, **kw)


def _verify_all(task, completions):
    if hasattr(task.verify, "batch"):
        return task.verify.batch(task.samples, completions)
    return [task.verify(s, c) for s, c in zip(task.samples, completions)]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_spec(spec):
    assert spec.family in FAMILIES and isinstance(spec.version, int) and spec.version >= 1
    assert spec.splits and spec.description


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_gold_scores_one_and_empty_is_no_answer(spec):
    for split in spec.splits[:2] if spec.name not in FIXTURE_KW else spec.splits[-1:]:
        task = _build(spec, split)
        assert task.name == spec.name and task.family == spec.family and task.version == spec.version
        samples = list(task.samples)
        assert 0 < len(samples) <= N
        with_gold = [s for s in samples if s.target]
        assert with_gold, f"{spec.name}: no gold targets to check"
        gold = _verify_all(task, [s.target if s.target else "" for s in samples])
        for s, r in zip(samples, gold):
            assert r.status in STATUSES
            if s.target:
                assert (r.status, r.value) == ("correct", 1.0), (s.id, r)
        for r in _verify_all(task, [""] * len(samples)):
            assert r.status == "no_answer" and r.value == 0.0


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_ids_unique_stable_and_metadata_json(spec):
    split = spec.splits[-1] if spec.name in FIXTURE_KW else ("test" if "test" in spec.splits else spec.splits[0])
    a, b = _build(spec, split), _build(spec, split)
    ids = [s.id for s in a.samples]
    assert len(set(ids)) == len(ids)
    assert [(s.id, s.prompt, s.target) for s in a.samples] == [(s.id, s.prompt, s.target) for s in b.samples]
    for s in a.samples:
        assert s.id.startswith(spec.name + "/") or spec.name == "even_length"
        json.dumps(dict(s.metadata))


@pytest.mark.parametrize("spec", [s for s in SPECS if s.name not in FIXTURE_KW and len(s.splits) > 1],
                         ids=lambda s: s.name)
def test_train_and_test_ids_disjoint(spec):
    if spec.name == "even_length":
        pytest.skip("test double")
    n = 16 if spec.name == "sudoku" else 50  # 9x9 generation is the slow one
    train = {s.id for s in spec.build(split="train", n=n).samples}
    test = {s.id for s in spec.build(split="test", n=n).samples}
    assert not train & test


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_deterministic(spec):
    task = _build(spec, spec.splits[-1] if spec.name in FIXTURE_KW else spec.splits[0])
    probes = [s.target for s in task.samples] + ["<answer>1</answer>", "garbage 12 {", "```python\nx = 1\n```"]
    samples = list(task.samples) + [task.samples[0]] * 3
    once = [task.verify(s, c) for s, c in zip(samples, probes)]
    twice = [task.verify(s, c) for s, c in zip(samples, probes)]
    for r1, r2 in zip(once, twice):
        assert r1.status == r2.status
        assert (math.isnan(r1.value) and math.isnan(r2.value)) or r1.value == r2.value


@pytest.mark.parametrize("spec", [s for s in SPECS if s.tiny], ids=lambda s: s.name)
def test_tiny_families_fit_a_tiny_char_model(spec):
    for split in ("train", "test"):
        for s in spec.build(split=split, n=300).samples:
            assert s.prompt.isascii() and len(s.prompt) <= 64, s.prompt
            assert s.target and s.target.isascii() and len(s.target) <= 48, s.target


def test_the_tiny_default_covers_every_family():
    assert {s.family for s in SPECS if s.tiny} == set(FAMILIES)
