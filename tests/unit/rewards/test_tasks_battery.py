"""One battery over EVERY registered task (daca_bench/rewards/battery.py, the checks
`daca-bench tasks --check NAME` runs): gold completions score 1, the empty string is no_answer,
ids are unique and stable, splits disjoint, scoring is deterministic, sample metadata is JSON,
and the tiny families fit a tiny character model. A new task passes this battery or says why;
a task whose data lives on the hub lists its offline fixture in FIXTURE_KW."""

import pytest

from daca_bench.registry import FAMILIES, list_tasks
from daca_bench.rewards import codecheck
from daca_bench.rewards.battery import run_check

import sandbox_double
from repo_paths import FIXTURES as FIX

FIXTURE_KW = {
    "gsm8k": {"path": FIX / "gsm8k.jsonl"},
    "math500": {"path": FIX / "math500.jsonl"},
    "mbpp": {"path": FIX / "mbpp.jsonl"},
    # d1's protocol tasks on files this project wrote in d1's formats (d1's data is not shipped)
    "sudoku_d1": {"path": FIX / "d1_sudoku.csv"},
    "countdown_d1": {"path": FIX / "d1_countdown.jsonl"},
}
SPECS = list_tasks()


@pytest.fixture(autouse=True)
def host_double():
    codecheck.use_backend(sandbox_double)  # code tasks: gold must pass, in a host subprocess here
    yield
    codecheck.use_backend(None)


def _check(name, spec, **options):
    check = run_check(name, spec, FIXTURE_KW.get(spec.name), **options)
    if check.skipped:
        pytest.skip(check.skipped)
    assert check.ok, f"{spec.name} {name}: " + "; ".join(check.problems)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_spec(spec):
    _check("spec", spec)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_gold_scores_one_and_empty_is_no_answer(spec):
    _check("gold", spec)
    _check("empty", spec)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_ids_unique_stable_and_metadata_json(spec):
    _check("ids", spec, prefix=spec.name != "even_length")  # the test double's ids are even/<split>/<i>


@pytest.mark.parametrize(
    "spec", [s for s in SPECS if s.name not in FIXTURE_KW and len(s.splits) > 1], ids=lambda s: s.name
)
def test_splits_share_no_id(spec):
    _check("disjoint", spec, n=16 if spec.name == "sudoku" else 50)  # 9x9 generation is the slow one


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_deterministic(spec):
    _check("deterministic", spec)


@pytest.mark.parametrize("spec", [s for s in SPECS if s.tiny], ids=lambda s: s.name)
def test_tiny_families_fit_a_tiny_char_model(spec):
    _check("lengths", spec)


def test_the_tiny_default_covers_every_family():
    assert {s.family for s in SPECS if s.tiny} == set(FAMILIES)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_each_status_scores_its_value(spec):
    _check("values", spec)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_never_raises_on_junk(spec):
    _check("junk", spec)
