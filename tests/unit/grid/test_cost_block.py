"""`daca-bench cost` for a block model (issue 57): the exact block cache's rollout FLOPs (`block_rollout`,
two counted ends per window width) equal every block's passes counted one by one, the likelihood is counted
on the two-stream canvas, and the block-cached rollout costs less than recomputing the canvas."""

from dataclasses import replace

import pytest
import torch

from daca_bench.config import RLConfig, load_config
from daca_bench.experiments.grid.cost import _count, block_rollout, step_flops
from daca_bench.testing.paper import paper_model

from repo_paths import ROOT


@pytest.fixture(scope="module")
def meta():
    with torch.device("meta"):
        return paper_model("sdar", compact=True)


def test_block_rollout_is_every_blocks_passes(meta):
    P, L, B, steps = 6, 16, 4, 8  # 4 blocks, 2 passes each
    brute = _count(meta, P + B, grad=False) + _count(meta, P + B, grad=False, window=(P, P + B))
    for j in range(1, L // B):
        end = P + (j + 1) * B
        brute += _count(meta, end, grad=False, window=(end - 2 * B, end))
        brute += _count(meta, end, grad=False, window=(end - B, end))
    assert block_rollout(meta, P, L, B, steps) == pytest.approx(brute, rel=1e-9)
    assert block_rollout(meta, P, L, B, steps) < steps * _count(meta, P + L, grad=False)


def test_the_sdar_preset_is_modelled_with_its_block_cache_and_two_streams(meta):
    cfg = load_config(ROOT / "configs/paper/sdar_gsm8k.yaml", [], RLConfig)
    assert cfg.rollout.cache == "block" and cfg.rollout.block_length == 4
    small = replace(
        cfg,
        train=replace(cfg.train, max_prompt_length=6, prompts_per_step=2, num_generations=2, lora=False),
        rollout=replace(cfg.rollout, gen_length=8, steps=8),
    )
    f = step_flops(small, model=meta)
    assert f["canvas"] == 14
    assert f["likelihood"] == pytest.approx(small.train.mu * 4 * _count(meta, 14 + 8 - 4, grad=True), rel=1e-9)
    assert f["rollout"] == pytest.approx(4 * block_rollout(meta, 6, 8, 4, 8), rel=1e-9)
    none = step_flops(replace(small, rollout=replace(small.rollout, cache="none")), model=meta)
    assert none["rollout"] > f["rollout"] and none["likelihood"] == f["likelihood"]


def test_the_tiny_block_preset_is_predicted_as_its_cells_counted_it():
    """`daca-bench cost --preset tiny-block`: the RL cells take the block size from their SFT folder, so the cost
    model gives each arm its family's `Family.block`; the tiny BERT's cached passes run as the sampler runs them
    (archs/bert.py), and causal strata are clamped to a block's denoising steps as the trainer clamps them (3 on
    sudoku, 2 on json). Each grpo arm's FLOPs per cell equal the committed run's ledger (results/tiny-block)
    within 2 %; without the clamp +DACA's json prediction would be 1.9x its ledger."""
    import pandas as pd

    from daca_bench.experiments.grid.cost import PHASES, arms

    table = ROOT / "results" / "tiny-block" / "table.csv"
    if not table.is_file():
        pytest.skip("results/tiny-block is not in this checkout")
    ledger = pd.read_csv(table).drop_duplicates(["base", "task", "variant"]).set_index(["base", "task", "variant"])
    checked = 0
    for group, variant, cfg in arms("tiny-block", None):
        base, task = group.split()
        if base != "grpo" or variant not in ("baseline", "+DACA"):
            continue
        assert cfg.model.block_size == {"sudoku_tiny": 6, "json_tiny": 4}[task]
        f = step_flops(cfg)
        assert f["strata"] == (1 if variant == "baseline" else {"sudoku_tiny": 3, "json_tiny": 2}[task])
        per_cell = sum(f[p] for p in PHASES) * cfg.train.steps
        assert per_cell == pytest.approx(ledger.loc[(base, task, variant), "flops_train"], rel=0.02), (task, variant)
        checked += 1
    assert checked == 4
