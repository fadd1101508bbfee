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
