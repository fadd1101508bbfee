"""Accuracy is the share of correct answers (issue 55 items 1-2): a verifier's value is checked against
what its task declares (types.reward_problem: correct 1; wrong, no_answer, timeout 0 unless the task
declares partial credit; a shaped reward in its range), `tasks --check` and `verify` refuse a value
outside it in one line, and eval, cells and tables count `status == correct`, with the mean reward
beside it under its own name. A shipped task is a fixed list (registry.SHIPPED_TASKS), never a folder."""

import json
import math
import sys

import pytest

from daca_bench import registry
from daca_bench.cli import main
from daca_bench.errors import ConfigError, RewardError
from daca_bench.eval.evaluate import mean_reward_beside, read_eval_records, summarize
from daca_bench.experiments.analysis.accuracy import checked_accuracy
from daca_bench.experiments.analysis.render import to_csv, to_markdown
from daca_bench.experiments.analysis.results import load_table
from daca_bench.rewards.battery import run_check
from daca_bench.types import CORRECT, NO_ANSWER, WRONG, Reward, reward_problem

# two 2-digit numbers in words, added; a wrong sum gets partial credit by its distance (on purpose)
from repo_paths import ROOT

ADD = """
import random

from daca_bench.registry import register_task
from daca_bench.rewards.scoring import hash_split, stable_seed
from daca_bench.rewards.stock import answer_text, numeric
from daca_bench.types import Reward, Sample, Task

WORDS = "zero one two three four five six seven eight nine".split()


def _sample(a, b):
    prompt = " ".join(WORDS[int(c)] for c in str(a)) + " plus " + " ".join(WORDS[int(c)] for c in str(b)) + "\\n"
    return Sample(f"NAME/{a}+{b}", prompt, str(a + b), {"total": a + b})


def verify(sample, completion):
    reward = numeric(str(sample.metadata["total"]), completion)
    if reward.status != "wrong":
        return reward
    try:
        got = int(answer_text(completion))
    except ValueError:
        return reward
    gold = sample.metadata["total"]
    return Reward(CREDIT, "wrong", {"answer": got})


@register_task("NAME", family="math", version=1, partial_credit=PARTIAL, description="add two numbers in words")
def build(split="test", n=None, seed=0, records=None):
    if records is not None:
        return Task("NAME", "math", 1, [_sample(r["a"], r["b"]) for r in records], verify, split)
    rng, out = random.Random(stable_seed("NAME", split, seed)), {}
    while len(out) < (n or 32):
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        if hash_split(f"NAME/{a}+{b}", dev_share=0) == split:
            out.setdefault((a, b), _sample(a, b))
    return Task("NAME", "math", 1, list(out.values()), verify, split)
"""
GOOD = "max(0.0, 0.5 - abs(got - gold) / (2 * gold))"  # partial credit in [0, 0.5], declared
NO_ABS = "1 - (got - gold) / gold"  # forgot abs(): a low answer scores up to 2.0 (the verifier)


@pytest.fixture
def tasks(tmp_path, monkeypatch):
    """A folder of task files, loaded as --tasks-dir would; the registry restored afterwards."""
    registry.list_tasks()
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    before = set(sys.modules)
    folder = tmp_path / "my_tasks"
    folder.mkdir()

    def write(name, credit, partial):
        (folder / f"{name}.py").write_text(
            ADD.replace("NAME", name).replace("CREDIT", credit).replace("PARTIAL", str(partial))
        )
        registry.load_file(folder / f"{name}.py")
        return registry.task_spec(name)

    yield write
    for k in set(sys.modules) - before:
        if k.startswith("daca_bench_tasks."):
            del sys.modules[k]


def test_reward_problem_names_what_a_status_may_score():
    assert reward_problem(Reward(1.0, CORRECT)) is None and reward_problem(Reward(0.0, NO_ANSWER)) is None
    assert "outside [0, 1]" in reward_problem(Reward(2.0, WRONG))
    assert (
        "must be 0 for wrong" in reward_problem(Reward(0.3, WRONG)) and reward_problem(Reward(0.3, WRONG), True) is None
    )
    assert "must be 1" in reward_problem(Reward(0.5, CORRECT), partial_credit=True)
    assert reward_problem(Reward(2.75, CORRECT, {"shaping": "d1"})) is None  # d1's MATH reward: its own range
    assert "range of its 'dense' shaping" in reward_problem(Reward(0.7 + 1, WRONG, {"shaping": "dense"}))
    with pytest.raises(ValueError, match="only an infrastructure failure carries NaN"):
        Reward(math.nan, WRONG)


def test_a_value_the_task_does_not_allow_is_refused_in_one_line(tasks, tmp_path, capsys):
    tasks("addbug", NO_ABS, True)
    task = registry.get_task("addbug", records=[{"a": 40, "b": 32}])
    with pytest.raises(RewardError) as err:
        task.verify(task.samples[0], "<answer>12</answer>")  # far too low: 1 + 60/72
    line = str(err.value)
    assert "task 'addbug'" in line and "'<answer>12</answer>'" in line and "\n" not in line
    # tasks --check: the values check fails, naming the status and the value; the others still run
    assert main(["tasks", "--check", "addbug"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  values" in out and "scores wrong" in out and "ok    gold" in out and "ok    junk" in out
    # verify: the same refusal, one line, exit 2, no reward 2.0 beside status wrong
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"a": 40, "b": 32, "completion": "2"}) + "\n")
    assert main(["verify", "addbug", "--input", str(src), "--output", str(tmp_path / "out.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert "task 'addbug'" in err and "outside [0, 1]" in err and "\n" not in err
    assert "2.0" not in (tmp_path / "out.jsonl").read_text()


def test_partial_credit_undeclared_fails_the_values_check_and_junk_raising_is_its_own_check(tasks):
    spec = tasks("addundeclared", GOOD, False)
    check = run_check("values", spec)
    assert not check.ok and "must be 0 for wrong" in check.problems[0] and "partial_credit=True" in check.problems[0]
    spec = tasks("addjunk", GOOD, True)
    module = sys.modules["daca_bench_tasks.addjunk"]
    inner = module.verify
    module.verify = lambda s, c: inner(s, c) if c.strip() and c.isascii() else 1 / 0  # raises on junk
    try:
        assert not run_check("junk", spec).ok and "raises ZeroDivisionError" in run_check("junk", spec).problems[0]
        assert run_check("deterministic", spec).ok  # a raising verifier is the junk check's, not "deterministic"
    finally:
        module.verify = inner


def test_accuracy_is_the_share_correct_and_the_mean_reward_stands_beside_it(tasks, tmp_path):
    spec = tasks("addpartial", GOOD, True)
    for name in ("spec", "gold", "empty", "values", "junk", "deterministic"):
        assert run_check(name, spec).ok, (name, run_check(name, spec).problems)
    task = registry.get_task("addpartial", n=8)
    completions = [s.target if i < 2 else str(int(s.target) - 3) for i, s in enumerate(task.samples)]
    rewards = [task.verify(s, c) for s, c in zip(task.samples, completions)]
    result = summarize(rewards)
    assert result["accuracy"] == 2 / 8 and result["mean_reward"] > result["accuracy"]
    assert mean_reward_beside(result, "test_mean_reward") == {"test_mean_reward": result["mean_reward"]}
    assert mean_reward_beside(summarize([Reward(1.0, CORRECT), Reward(0.0, WRONG)])) == {}
    # the per-prompt records a table pairs: the status decides, never the reward
    path = tmp_path / "eval.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": s.id, "reward": r.value, "status": r.status}) + "\n"
            for s, r in zip(task.samples, rewards)
        )
    )
    records = read_eval_records(path)
    assert sorted(records.values()) == [0.0] * 6 + [1.0] * 2
    path.write_text(json.dumps({"id": "x", "reward": 0.4}) + "\n")
    with pytest.raises(ConfigError, match="without a known status"):
        read_eval_records(path)


def _cell(folder, variant, seed, rewards, statuses, stored, records=True):
    cell = folder / f"variant={variant}_seed={seed}"
    cell.mkdir(parents=True)
    (cell / "config.json").write_text(
        json.dumps(
            {
                "train": {"task": "sort4x", "seed": seed},
                "loss": {"base": "grpo"},
                "dps": {"enabled": variant != "baseline"},
                "sml": {"k": 1 if variant == "baseline" else 4},
            }
        )
    )
    (cell / "axes.json").write_text(json.dumps({"variant": variant}))
    record = {"name": "sort4x", "family": "constraint", "version": 1, "cluster": None, "clusters": {}}
    (cell / "summary.json").write_text(
        json.dumps(
            {
                "task": "sort4x",
                "test_accuracy": stored,
                "task_record": record,
                **({"statuses": statuses} if statuses else {}),
            }
        )
    )
    if records:
        (cell / "eval.jsonl").write_text(
            "".join(json.dumps({"id": f"p{i}", "reward": r, "status": s}) + "\n" for i, (r, s) in enumerate(rewards))
        )


def test_old_cells_that_stored_a_mean_reward_are_recounted_or_refused(tmp_path):
    rewards = [(1.0, "correct"), (0.9, "wrong"), (0.5, "wrong"), (0.0, "no_answer")]  # share 0.25, mean 0.6
    for seed in range(2):
        for variant in ("baseline", "+DACA"):
            _cell(tmp_path / "run", variant, seed, rewards, None, 0.6)
    table = load_table(tmp_path / "run")
    assert set(table["acc"].round(6)) == {25.0}
    _cell(tmp_path / "counts", "baseline", 0, rewards, {"correct": 1, "wrong": 2, "no_answer": 1}, 0.6, records=False)
    assert checked_accuracy(0.6, statuses={"correct": 1, "wrong": 2, "no_answer": 1, "infra_error": 3}) == 0.25
    assert checked_accuracy(0.5, {"a": 1.0, "b": 0.0, "c": None}) == 0.5  # agrees: kept as stored
    with pytest.raises(ConfigError, match="stored accuracy 1.09 is outside \\[0, 1\\].*rerun its evaluation"):
        checked_accuracy(1.09, where="cellX")


def test_committed_cells_store_the_share_of_correct_answers():
    """Every committed cell's stored accuracy is its records' share of correct answers, and every committed
    reward is exactly 1 for correct and 0 otherwise: the shipped tasks give no partial credit."""

    from daca_bench.experiments.analysis.cellstore import cells, eval_records

    root = ROOT / "results"
    checked = 0
    for packed in sorted(root.glob("**/cells.parquet")):  # every committed run's cells, packed (issue 54)
        for cell in cells(packed.parent / "cells"):
            if not cell.has("eval.jsonl"):
                continue
            rows = cell.rows("eval.jsonl")
            assert all(r["reward"] is None or r["reward"] == float(r["status"] == CORRECT) for r in rows), cell.where
            summary = cell.json("summary.json") if cell.has("summary.json") else {}
            if "test_accuracy" in summary:
                stored = summary["test_accuracy"]
                assert checked_accuracy(stored, eval_records(cell), where=cell.where) == stored, cell.where
                checked += 1
    assert checked > 100


def test_the_shipped_tasks_are_a_fixed_list_of_the_shipped_folder_s_tasks():
    from daca_bench.registry import SHIPPED_TASKS, TASKS_DIR, list_tasks, task_source

    shipped = {s.name for s in list_tasks() if str(TASKS_DIR.resolve()) in task_source(s)}
    assert shipped == SHIPPED_TASKS


def test_a_task_file_moved_into_tasks_gets_no_paper_gain_and_the_same_table(tmp_path, monkeypatch):
    """new-task writes to tasks/ by default: a task of one's own there is no shipped task (the table, the
    gains figure's note and its paper mark read registry.SHIPPED_TASKS, never the folder)."""
    from daca_bench.experiments.analysis.variants import paper_area

    rewards = [(1.0, "correct"), (0.0, "wrong"), (1.0, "correct"), (0.0, "wrong")]
    for seed in range(2):
        _cell(tmp_path / "run", "baseline", seed, rewards, None, 0.5)
        _cell(tmp_path / "run", "+DACA", seed, rewards[::-1][:3] + [(1.0, "correct")], None, 0.75)
    elsewhere = to_csv(load_table(tmp_path / "run")), to_markdown(load_table(tmp_path / "run"))
    shipped = tmp_path / "tasks"
    shipped.mkdir()
    (shipped / "sort4x.py").write_text(
        ADD.replace("NAME", "sort4x")
        .replace("CREDIT", GOOD)
        .replace("PARTIAL", "True")
        .replace('"math"', '"constraint"')
    )
    registry.list_tasks()
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "TASKS_DIR", shipped)  # the file is now in "the shipped folder"
    registry.load_file(shipped / "sort4x.py")
    try:
        assert math.isnan(paper_area("sort4x", "constraint")) and paper_area("sudoku_tiny", "constraint") == 36.3
        table = load_table(tmp_path / "run")
        assert (to_csv(table), to_markdown(table)) == elsewhere and "+36.3" not in elsewhere[1]
    finally:
        sys.modules.pop("daca_bench_tasks.sort4x", None)
