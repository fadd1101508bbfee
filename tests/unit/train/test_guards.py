"""Collapse guards (daca_bench/train/guards.py): the columns from a hand-made record, the bounds,
and a threshold training run whose planted collapse trips the guard, which stops it with a checkpoint."""

import json
import math

import pytest
import torch

from daca_bench.config import GuardConfig, RLConfig, SamplerConfig, load_config
from daca_bench.errors import ConfigError
from daca_bench.rl.sampler import RolloutBatch, Trajectory, sample
from daca_bench.train.guards import Guard, collapse_stats, fallback_steps


def _batch(commit_step, commit_logp, entropy, ids):
    commit_step, ids = torch.tensor(commit_step), torch.tensor(ids)
    n, L = commit_step.shape
    traj = Trajectory(
        commit_step, torch.tensor(commit_logp).log(), torch.zeros(n, int(commit_step.max()), L), torch.tensor(entropy)
    )
    return RolloutBatch(
        torch.zeros(n, 1, dtype=torch.long),
        torch.ones(n, 1, dtype=torch.long),
        ids,
        torch.ones(n, L, dtype=torch.bool),
        [""] * n,
        traj,
        int(commit_step.max()),
    )


def test_columns_from_a_hand_made_record():
    # row 0: step 1 commits two tokens above 0.5, step 2 one forced token (p 0.3), step 3 one above (p 0.9)
    # row 1: every step one forced token
    batch = _batch(
        [[1, 1, 2, 3], [1, 2, 3, 4]],
        [[0.8, 0.7, 0.3, 0.9], [0.2, 0.4, 0.1, 0.3]],
        [[0.5, 0.5, 2.0, 0.1], [3.0, 3.0, 3.0, 3.0]],
        [[5, 6, 7, 8], [5, 6, 7, 8]],
    )
    forced, ran = fallback_steps(batch.trajectory.commit_step, batch.trajectory.commit_logp, 0.5)
    assert forced.tolist() == [[False, True, False, False], [True, True, True, True]]
    assert ran.tolist() == [[True, True, True, False], [True] * 4]
    stats = collapse_stats(batch, 2, 0.5)
    assert stats["guard_fallback_frac"] == pytest.approx(5 / 7)
    assert stats["guard_fallback_entropy"] == pytest.approx((2.0 + 4 * 3.0) / 5)
    assert stats["guard_commit_entropy"] == pytest.approx((0.5 + 0.5 + 2.0 + 0.1 + 12.0) / 8)
    assert stats["guard_distinct_frac"] == pytest.approx(0.5)  # one group of two identical completions
    assert "guard_fallback_frac" not in collapse_stats(batch, 1, None)  # greedy schedule: no fallback column
    assert collapse_stats(batch, 1, None)["guard_distinct_frac"] == 1.0


def test_the_sampler_records_what_the_fallback_column_reads(tiny):
    cfg = SamplerConfig(gen_length=8, block_length=8, steps=8, threshold=0.02, temperature=0.9)
    batch = sample(tiny, ["12+5=", "3-1+20=", "7="], cfg, seed=0)
    forced, ran = fallback_steps(batch.trajectory.commit_step, batch.trajectory.commit_logp, 0.02)
    per_step = torch.stack([(batch.trajectory.commit_step == t).sum(1) for t in range(1, forced.shape[1] + 1)], 1)
    assert torch.equal(ran, per_step > 0) and (per_step[forced] == 1).all()


def test_bounds_warn_then_stop_after_patience(capsys):
    guard = Guard(
        GuardConfig(action="stop", patience=2, max_fallback_frac=0.5, min_distinct_frac=0.3, max_fallback_entropy=None)
    )
    assert not guard.tripped({"guard_fallback_frac": 0.4, "guard_distinct_frac": 0.9}, 1)
    assert not guard.tripped({"guard_fallback_frac": 0.6, "guard_distinct_frac": 0.9}, 2)  # streak 1 of 2
    assert not guard.tripped({"guard_fallback_frac": 0.1, "guard_distinct_frac": 0.9}, 3)  # streak reset
    assert not guard.tripped({"guard_fallback_frac": 0.1, "guard_distinct_frac": 0.2}, 4)
    assert guard.tripped({"guard_fallback_frac": math.nan, "guard_distinct_frac": 0.1}, 5)
    assert "guard_distinct_frac=0.100 < guard.min_distinct_frac=0.3" in guard.message
    assert "stopping with a checkpoint" in capsys.readouterr().err
    warn = Guard(GuardConfig(patience=1, max_commit_entropy=1.0))
    assert not warn.tripped({"guard_commit_entropy": 2.0}, 1)  # warn: never stops
    assert "guard_commit_entropy=2.000 > guard.max_commit_entropy=1.0" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="guard.action='halt'"):
        Guard(GuardConfig(action="halt"))


def test_a_planted_collapse_trips_the_guard_and_stops_the_run_with_a_checkpoint(tmp_path):
    """The untrained tiny model is far from confident: with rollout.threshold=0.99 every step commits
    only its forced token (fallback fraction 1), a collapse the guard must catch at once."""
    from daca_bench.train.trainer import train

    cfg = load_config(
        "configs/tiny.yaml",
        [
            "train.init=",
            "train.steps=5",
            "train.n_eval=4",
            "train.save_every=100",
            "train.prompts_per_step=2",
            "train.num_generations=4",
            "rollout.threshold=0.99",
            "guard.action=stop",
            "guard.patience=2",
            "guard.max_fallback_frac=0.9",
        ],
        RLConfig,
    )
    out = train(cfg, tmp_path, progress=False)
    assert out["stopped"] and out["step"] == 2 and "guard_fallback_frac=1.000" in out["guard"]
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    for row in rows:
        assert row["guard_fallback_frac"] == 1.0 and 0 < row["guard_fallback_entropy"] <= math.log(100) + 1e-4
        assert 0 < row["guard_commit_entropy"] and 0 < row["guard_distinct_frac"] <= 1 and "zero_std_groups" in row
    assert (tmp_path / "checkpoint-2").is_dir() and not (tmp_path / "summary.json").exists()
