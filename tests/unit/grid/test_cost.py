"""`daca-bench cost` (issue 48): the FLOPs it predicts per step from a config alone equal what the
ledger (rl/ledger.py) counts in a real step, within 5 %, for the tiny preset's baseline and +DACA;
and it prints the paper presets at LLaDA-8B's shape from the meta device (no weights)."""

import json
from dataclasses import replace

import pytest

from daca_bench.cli import main
from daca_bench.config import apply
from daca_bench.experiments.grid.cost import PHASES, arms, step_flops
from daca_bench.train.trainer import train


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["baseline", "+DACA"])
def test_the_predicted_flops_per_step_match_the_ledger_within_5_percent(tmp_path, variant):
    cfg = next(c for _, v, c in arms("tiny", None) if v == variant)
    cfg = apply(cfg, {"train.steps": 1, "train.n_eval": 4, "train.threads": 1})
    predicted = step_flops(cfg)
    train(cfg, tmp_path, progress=False)
    row = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[0])
    for phase in PHASES:
        assert row[f"flops_{phase}"] == pytest.approx(predicted[phase], rel=0.05), phase
    ledger = json.loads((tmp_path / "summary.json").read_text())["ledger"]
    assert ledger["flops_train"] == pytest.approx(sum(predicted[p] for p in PHASES), rel=0.05)
    assert ledger["completions"] == cfg.train.prompts_per_step * cfg.train.num_generations
    # the strata are counted: +DACA's K = 4 passes show in its canvases, not hidden in one module call
    assert row["passes_likelihood"] == cfg.train.mu * min(cfg.sml.k, cfg.rollout.gen_length) * predicted["rows"]


def test_daca_costs_more_than_its_baseline_by_its_strata():
    (_, _, base), (_, _, daca) = [a for a in arms(None, "configs/paper/llada_gsm8k.yaml")]
    b, d = step_flops(base), step_flops(daca)
    assert b["rollout"] == d["rollout"]  # DACA's credit reads the rollout's record: no extra rollout pass
    assert d["likelihood"] == pytest.approx(4 * b["likelihood"], rel=1e-6)  # K = 4 strata per update
    assert b["rows"] == 96 and b["canvas"] == 456  # 16 prompts x 6, 200 + 256 tokens


def test_cost_prints_the_paper_preset_and_refuses_what_it_does_not_model(capsys, tmp_path):
    assert main(["cost", "--config", "configs/paper/llada_gsm8k.yaml"]) == 0
    out = capsys.readouterr().out
    assert "+DACA" in out and "rollout share" in out and "1.91x" in out
    cached = next(c for _, v, c in arms("tiny", None) if v == "baseline")
    with pytest.raises(Exception, match="uncached"):
        step_flops(replace(cached, rollout=replace(cached.rollout, cache="prefix")))
