"""Issue 55's user, walked by a test: a second scaffolded task unlike the example (two 2-digit numbers
written in words, added: record fields `prompt`, `answer`, `a`, `b`; math family; the stock numeric
verifier with partial credit on purpose; its own cluster key), edited in the three places the scaffold
names (nothing else), through check, its own test, verify, SFT, eval, a grid whose `base:` is a mapping
of keys, the table and the plots; in every output the accuracy is the share of answers whose status is
`correct`, and the mean reward stands beside it under its own name where the two differ."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from daca_bench import registry
from daca_bench.cli import main
from daca_bench.errors import ConfigError
from daca_bench.experiments.grid.ablation import expand

from repo_paths import ROOT

EDIT = re.compile(r"^def .*?(?=^# ---- nothing below)", re.S | re.M)  # from the first def (_draw) to verify: the user's
ADD2W = '''def _words(n: int) -> str:
    """47 -> 'forty-seven'."""
    ones = "zero one two three four five six seven eight nine".split()
    tens = "- - twenty thirty forty fifty sixty seventy eighty ninety".split()
    teens = "ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
    return teens[n - 10] if n < 20 else tens[n // 10] + ("" if n % 10 == 0 else "-" + ones[n % 10])


def _draw(rng: random.Random) -> dict:
    """Two 2-digit numbers in words, added."""
    a, b = rng.randint(10, 99), rng.randint(10, 99)
    return {"prompt": f"{_words(a)} plus {_words(b)}\\n", "answer": str(a + b), "a": a, "b": b}


def verify(sample: Sample, completion: str):
    """The sum (the math family's numeric reading); a wrong number earns partial credit, on purpose."""
    from daca_bench.rewards.scoring import digit_credit
    from daca_bench.rewards.stock import answer_text, numeric
    from daca_bench.types import Reward

    reward = numeric(sample.metadata["answer"], completion)
    if reward.status != "wrong":
        return reward
    credit = 0.05 + 0.45 * digit_credit(sample.metadata["answer"], answer_text(completion))
    return Reward(credit, "wrong", dict(reward.details))


'''


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """A registry that loads the task folders again, as a new process would; restored afterwards."""
    monkeypatch.chdir(tmp_path)
    registry.list_tasks()
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "_loaded", None)
    monkeypatch.setenv("DACA_BENCH_TASKS", os.environ.get("DACA_BENCH_TASKS", ""))
    before = {k for k in sys.modules if k.startswith("daca_bench_tasks.")}
    yield
    for k in {k for k in sys.modules if k.startswith("daca_bench_tasks.")} - before:
        del sys.modules[k]


def _share(path: Path) -> tuple[float, float]:
    """(share of correct answers, mean reward) over the scored rows of an eval.jsonl / samples.jsonl."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    scored = [r for r in rows if r["reward"] is not None]
    return sum(r["status"] == "correct" for r in scored) / len(scored), sum(r["reward"] for r in scored) / len(scored)


def test_a_grid_base_may_be_a_mapping_of_keys_or_is_refused_in_one_line(tmp_path, capsys):
    (cell,) = expand({"base": {"train.steps": 3, "train": {"lr": 2e-4}}, "axes": {}})
    assert cell.config.train.steps == 3 and cell.config.train.lr == 2e-4 and cell.config.model.name == "tiny"
    with pytest.raises(ConfigError, match="neither a config file"):
        expand({"base": 5, "axes": {}})
    grid = tmp_path / "grid.yaml"
    grid.write_text("{base: [configs/tiny.yaml], axes: {train.seed: [0]}}\n")
    assert main(["ablate", str(grid), "--output-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "grid base" in err and "\n" not in err and "Traceback" not in err


@pytest.mark.slow
def test_a_task_unlike_the_example_walks_through_and_accuracy_is_the_share_correct(tmp_path, fresh, capsys):
    folder, tests = tmp_path / "my_tasks", tmp_path / "my_tests"
    assert main(["new-task", "add2w", "--dir", str(folder), "--test-dir", str(tests), "--family", "math"]) == 0
    path = folder / "add2w.py"
    written = path.read_text()
    edited = EDIT.sub(lambda m: ADD2W, written).replace('CLUSTER = "answer"', 'CLUSTER = "a"')
    edited = edited.replace("PARTIAL_CREDIT = False", "PARTIAL_CREDIT = True")
    path.write_text(edited)
    # only the three places changed: _draw (with its helper), CLUSTER and verify (PARTIAL_CREDIT declares it)
    rest = lambda text: [  # noqa: E731
        line for line in EDIT.sub("", text).splitlines() if not line.startswith(("CLUSTER =", "PARTIAL_CREDIT ="))
    ]
    assert rest(written) == rest(edited)
    capsys.readouterr()

    assert main(["tasks", "--tasks-dir", str(folder), "--check", "add2w"]) == 0
    assert "add2w: 9 of 9 checks pass" in capsys.readouterr().out
    assert main(["tasks", "--tasks-dir", str(folder), "--show", "add2w", "--split", "dev", "-n", "3"]) == 0
    assert " plus " in capsys.readouterr().out
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0 and "6 passed" in done.stdout, done.stdout + done.stderr

    # verify: a gold, a near miss and nothing: accuracy 1/3, the mean reward (partial credit) beside it
    sample = registry.get_task("add2w", split="test", n=1).samples[0]
    near = str(int(sample.target) + 1)
    (tmp_path / "in.jsonl").write_text(
        "".join(json.dumps({**sample.metadata, "completion": c}) + "\n" for c in (sample.target, near, ""))
    )
    assert main(["verify", "add2w", "--tasks-dir", str(folder), "--input", "in.jsonl", "--output", "out.jsonl"]) == 0
    line = capsys.readouterr().out
    assert "accuracy 0.3333 (the share correct)" in line and "mean reward 0.3333" not in line

    # SFT, then eval of its model: accuracy is the share of correct rows, the mean reward beside it where it differs
    assert (
        main(
            [
                "sft",
                "--config",
                "configs/tiny_sft.yaml",
                "--tasks-dir",
                str(folder),
                "sft.task=add2w",
                "sft.steps=2",
                "sft.n_eval=8",
                "--output-dir",
                "runs/sft",
                "--no-progress",
            ]
        )
        == 0
    )
    sft = json.loads(Path("runs/sft/summary.json").read_text())
    out, err = capsys.readouterr()
    assert f"greedy test accuracy {sft['accuracy']:.3f}" in out
    assert ("answers none of the 8 test prompts correctly" in err) == (sft["accuracy"] == 0)
    assert (
        main(
            [
                "eval",
                "--model",
                "runs/sft/final",
                "--task",
                "add2w",
                "--n",
                "8",
                "--gen-length",
                "8",
                "--block-length",
                "8",
                "--steps",
                "8",
                "--output-dir",
                "runs/eval",
                "--no-progress",
            ]
        )
        == 0
    )
    acc, mean = _share(Path("runs/eval/samples.jsonl"))
    row = next(r for r in _csv(Path("runs/eval/summary.csv")))
    assert float(row["accuracy"]) == round(acc, 4) and (("mean_reward" in row) == (round(mean, 4) != round(acc, 4)))

    # a grid whose base is a mapping of keys on the default config; its table and plots without --tasks-dir
    Path("grid.yaml").write_text(
        "{base: {train.task: add2w, train.init: runs/sft/final}, "
        "axes: {variant: [headline:baseline, headline:+DACA], train.seed: [0]}}\n"
    )
    assert (
        main(
            [
                "ablate",
                "grid.yaml",
                "--tasks-dir",
                str(folder),
                "--output-dir",
                "runs/grid",
                "train.steps=1",
                "train.n_eval=8",
            ]
        )
        == 0
    )
    grid = Path("runs/grid")
    cells = {json.loads((c / "axes.json").read_text())["variant"]: c for c in grid.glob("variant=*")}
    assert set(cells) == {"baseline", "+DACA"}
    for cell in cells.values():
        s = json.loads((cell / "summary.json").read_text())
        acc, mean = _share(cell / "eval.jsonl")
        assert s["test_accuracy"] == acc and s.get("test_mean_reward", acc) == pytest.approx(mean)
    capsys.readouterr()
    assert main(["table", "runs/grid"]) == 0
    table = {r["variant"]: r for r in _csv(grid / "table.csv")}
    start, _ = _share(grid / "start" / "add2w" / "eval.jsonl")
    assert float(table["start"]["acc"]) == pytest.approx(100 * start, abs=1e-3)
    for variant, cell in cells.items():
        assert float(table[variant]["acc"]) == pytest.approx(100 * _share(cell / "eval.jsonl")[0], abs=1e-3)
    text = (grid / "table.md").read_text()
    assert "the families below are the default ones" in text and "preset's declared" not in text
    assert "+5.6" not in text  # no paper gain beside a task of one's own
    assert main(["plot", "runs/grid"]) == 0
    from daca_bench.experiments.figures.curves import load_curves

    finals = load_curves(grid).query("final").set_index("variant")["test_accuracy"]
    assert {v: finals[v] for v in cells} == {v: _share(c / "eval.jsonl")[0] for v, c in cells.items()}


def _csv(path: Path) -> list[dict]:
    import csv

    with open(path, newline="") as f:
        return list(csv.DictReader(f))
