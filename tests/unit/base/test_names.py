"""Names people know: TRL's config names as aliases, TRL's metric names in the logs, --print-config."""

import json
import math
import subprocess
import sys

import pytest

from daca_bench.config import TRL_ALIASES, ConfigError, RLConfig, RunConfig, load_config
from daca_bench.confighelp import describe

from repo_paths import ROOT


def test_trl_names_set_our_keys():
    cfg = load_config(
        None,
        [
            "num_iterations=2",
            "learning_rate=1e-5",
            "max_grad_norm=0.5",
            "gradient_accumulation_steps=4",
            "importance_sampling_level=sequence",
            "scale_rewards=group",
        ],
        RLConfig,
    )
    assert (cfg.train.mu, cfg.train.lr, cfg.train.grad_clip, cfg.train.grad_accum) == (2, 1e-5, 0.5, 4)
    assert cfg.loss.base == "gspo" and cfg.loss.scale_rewards is True
    cfg = load_config(None, ["importance_sampling_level=token", "scale_rewards=none"], RLConfig)
    assert cfg.loss.base == "grpo" and cfg.loss.scale_rewards is False


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["scale_rewards=batch"], "scale_rewards='batch' .*not supported; choose from group, none"),
        (["importance_sampling_level=word"], "choose from token, sequence"),
        (["learning_rate=1", "train.lr=2"], "set one of them, not both"),
    ],
)
def test_trl_names_refuse_what_we_do_not_have(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides, RLConfig)


def test_every_key_has_a_value_and_help():
    for cfg in (RLConfig(), RunConfig()):
        rows = describe(cfg)
        assert [k for k, _, h in rows if not h] == []
        assert len(rows) > 30
    keys = {k for k, _, _ in describe(RLConfig())}
    assert {ours for ours, _ in TRL_ALIASES.values()} <= keys


def test_print_config_shows_overrides_and_helps(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "daca_bench", "train", "--print-config", "learning_rate=3e-4"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "train.lr = 0.0003" in r.stdout and "# AdamW learning rate" in r.stdout
    assert "learning_rate -> train.lr" in r.stdout


@pytest.mark.slow
def test_metrics_carry_trl_names_beside_ours(tmp_path):
    from daca_bench.train.trainer import TRL_METRICS, train

    cfg = load_config(
        None,
        [
            "train.task=arithmetic",
            "train.steps=1",
            "train.prompts_per_step=2",
            "train.num_generations=2",
            "train.n_eval=2",
            "train.threads=1",
            "rollout.block_length=4",
            "rollout.steps=4",
            "eval.block_length=4",
            "eval.steps=4",
        ],
        RLConfig,
    )
    train(cfg, tmp_path, progress=False)
    row = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[0])
    for trl, ours in TRL_METRICS.items():
        assert row[trl] == row[ours] or (math.isnan(row[trl]) and math.isnan(row[ours]))
