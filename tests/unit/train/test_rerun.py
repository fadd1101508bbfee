"""A rerun of `train` or `sft` in a folder that holds a run: under another config it is refused in
one line naming the changed keys and --fresh (nothing relabelled, nothing resumed); with --fresh
the earlier run is set aside, never deleted; summary.json always agrees with config.json."""

import json

import pytest

from daca_bench.cli import main

TRAIN = [
    "train",
    "--no-progress",
    "train.task=even_length",
    "train.init=",
    "train.steps=2",
    "train.save_every=1",
    "train.prompts_per_step=2",
    "train.num_generations=4",
    "train.n_eval=4",
    "train.threads=1",
    "rollout.block_length=4",
    "rollout.steps=4",
    "eval.block_length=4",
    "eval.steps=4",
]
SFT = ["sft", "--no-progress", "sft.steps=2", "sft.n_eval=4", "sft.save_every=1", "sft.batch_size=8", "sft.n_train=64"]


def _read(folder, name):
    return json.loads((folder / name).read_text())


def _agree(folder):
    """summary.json says what config.json says (the keys it reports)."""
    cfg, s = _read(folder, "config.json"), _read(folder, "summary.json")
    assert (s["dps"], s["sml_k"], s["dps_score"], s["sml_partition"], s["steps"]) == (
        cfg["dps"]["enabled"],
        cfg["sml"]["k"],
        cfg["dps"]["score"],
        cfg["sml"]["partition"],
        cfg["train"]["steps"],
    )


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = tmp_path_factory.mktemp("train")
    assert main([*TRAIN, "--output-dir", str(out)]) == 0
    return out


@pytest.mark.parametrize(
    "change,named",
    [
        (["dps.enabled=true", "sml.k=4"], ["dps.enabled: False -> True", "sml.k: 1 -> 4"]),
        (["train.lr=1e-3"], ["train.lr: 5e-05 -> 0.001"]),
    ],
)
def test_a_train_rerun_under_another_config_is_refused_in_one_line(finished, capsys, change, named):
    before = {f: (finished / f).read_bytes() for f in ("config.json", "summary.json", "metrics.jsonl")}
    capsys.readouterr()
    assert main([*TRAIN, "--output-dir", str(finished), *change]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and all(n in err[0] for n in named) and "--fresh" in err[0], err
    assert {f: (finished / f).read_bytes() for f in before} == before  # nothing relabelled, nothing resumed


def test_a_train_rerun_may_extend_the_run_and_config_json_follows(tmp_path, capsys):
    out = tmp_path / "run"
    assert main([*TRAIN, "--output-dir", str(out)]) == 0
    assert main([*TRAIN, "--output-dir", str(out), "train.steps=3", "train.threads=2"]) == 0  # resumes at step 2
    assert _read(out, "summary.json")["steps"] == 3 and _read(out, "config.json")["train"]["threads"] == 2
    assert [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3]
    _agree(out)
    capsys.readouterr()
    assert main([*TRAIN, "--output-dir", str(out), "train.steps=2"]) == 2  # cannot shrink below the checkpoint
    assert "is at step 3, past train.steps=2" in capsys.readouterr().err


def test_fresh_sets_the_earlier_train_run_aside_and_relabels_nothing(tmp_path, capsys):
    out = tmp_path / "run"
    assert main([*TRAIN, "--output-dir", str(out)]) == 0
    old = (out / "summary.json").read_bytes()
    capsys.readouterr()
    assert (
        main([*TRAIN, "--output-dir", str(out), "--fresh", "dps.enabled=true", "sml.k=2", "sml.partition=causal"]) == 0
    )
    captured = capsys.readouterr()
    assert f"set aside in {out / '.stale' / '0'}" in captured.err
    assert (out / ".stale" / "0" / "summary.json").read_bytes() == old  # kept, not deleted
    assert (out / ".stale" / "0" / "final").is_dir() and (out / ".stale" / "0" / "checkpoint-2").is_dir()
    cfg = _read(out, "config.json")
    assert cfg["dps"]["enabled"] is True and cfg["sml"]["k"] == 2
    _agree(out)
    # the summary line names the DPS score and the partition
    assert "even_length grpo dps=progress sml.k=2 (causal): greedy test accuracy" in captured.out


def test_an_sft_rerun_with_another_task_is_refused_and_fresh_sets_it_aside(tmp_path, capsys):
    out = tmp_path / "sft"
    assert main([*SFT, "--output-dir", str(out)]) == 0
    before = (out / "summary.json").read_bytes()
    capsys.readouterr()
    assert main([*SFT, "--output-dir", str(out), "sft.task=even_length"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sft.task: 'arithmetic' -> 'even_length'" in err[0] and "--fresh" in err[0]
    assert (out / "summary.json").read_bytes() == before
    assert main([*SFT, "--output-dir", str(out), "sft.task=even_length", "--fresh"]) == 0
    assert _read(out, "summary.json")["task"] == _read(out, "config.json")["sft"]["task"] == "even_length"
    assert (out / ".stale" / "0" / "summary.json").read_bytes() == before


def test_changes_ignore_keys_added_since_at_their_default_and_the_stored_extras():
    from daca_bench.config import RLConfig, apply, to_dict
    from daca_bench.runfolder import changes

    stored = to_dict(RLConfig())
    del stored["train"]["reward"]  # a key added to the package after the run was written
    stored["git"] = "abc"
    assert changes(stored, RLConfig()) == []
    assert changes(stored, apply(RLConfig(), {"train.reward": "dense"})) == [("train.reward", "exact", "dense")]
    assert changes(stored, apply(RLConfig(), {"train.threads": 3}), ("train.threads",)) == []
