"""A released block-diffusion family (the native LLaDA2.0 class on its golden weights, archs/llada2.py) through
the sampler: the exact block cache (`sampler.cache=block`) decodes what the uncached block decode does,
token for token, with the same record; and the block likelihood scores what the record's sampler saw."""

from dataclasses import replace

import pytest
import torch

from daca_bench.adapter import ModelAdapter
from daca_bench.archs import LLaDA2MoeConfig, LLaDA2MoeModelLM
from daca_bench.config import ModelConfig, SamplerConfig
from daca_bench.models import load_model
from daca_bench.rl.sampler import sample

from repo_paths import FIXTURES

PROMPTS = [[5, 17, 33, 9, 41], [60, 2 + 70, 8], [12, 13, 14, 15, 16, 17, 18]]  # unequal: left padding


@pytest.fixture(scope="module")
def llada2():
    torch.set_num_threads(1)
    gold = torch.load(FIXTURES / "golden" / "llada2.pt")
    model = LLaDA2MoeModelLM(LLaDA2MoeConfig(**gold["config"])).eval()
    model.load_state_dict(gold["state"])
    tokenizer = load_model(ModelConfig()).tokenizer  # 100 tokens: decodes the 96 ids of the golden vocabulary
    return ModelAdapter(model, tokenizer, gold["mask_id"], 93, 94, block_size=gold["block"])


@pytest.mark.parametrize("temperature,threshold", [(0.0, None), (0.9, 0.3)])
def test_the_cached_block_decode_is_the_uncached_one(llada2, temperature, threshold):
    cfg = SamplerConfig(gen_length=8, block_length=4, steps=8, temperature=temperature, threshold=threshold)
    plain = sample(llada2, PROMPTS, cfg, seed=[5, 6, 7])
    cached = sample(llada2, PROMPTS, replace(cfg, cache="block"), seed=[5, 6, 7])
    assert torch.equal(plain.completion_ids, cached.completion_ids)
    a, b = plain.trajectory, cached.trajectory
    assert torch.equal(a.commit_step, b.commit_step) and plain.forward_passes == cached.forward_passes
    assert torch.allclose(a.commit_logp, b.commit_logp, atol=1e-5)
    assert torch.allclose(a.conf.nan_to_num(), b.conf.nan_to_num(), atol=1e-5)
    assert torch.equal(a.block, (torch.arange(8) // 4).expand(3, -1))
