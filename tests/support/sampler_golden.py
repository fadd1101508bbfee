"""The sampler's outputs before `sampler.cache` existed, on a small seeded tiny model, kept in
tests/fixtures/sampler_golden.pt so that tests/unit/rl/test_cache.py can check that `cache=none` still
decodes token for token as it did (ids, commit steps, recorded log-probs and confidences).

    PYTHONPATH=. python tests/support/sampler_golden.py     # rewrite the fixture (only from a sampler known good)
"""

from __future__ import annotations

import torch

from repo_paths import FIXTURES

FIXTURE = FIXTURES / "sampler_golden.pt"
PROMPTS = ["12+5=", "3-1+20=", "7=", "30-29-1=", "8*3=", "100-1="]
# name -> (sampler fields, seed): greedy, tempered, random remasking, parallel, per-row seeds
CASES = {
    "greedy": (dict(gen_length=16, block_length=4, steps=16), 0),
    "tempered": (dict(gen_length=16, block_length=8, steps=8, temperature=0.9), 3),
    "random": (dict(gen_length=12, block_length=4, steps=6, temperature=1.0, remasking="random"), 5),
    "threshold": (dict(gen_length=16, block_length=8, steps=16, threshold=0.013), 1),
    "per_row": (dict(gen_length=8, block_length=4, steps=8, temperature=0.7), [10, 11, 12, 13, 14, 15]),
}


def small_model():
    """A 2-layer tiny model (hidden 32) whose weights are stored with the fixture."""
    from daca_bench.config import ModelConfig
    from daca_bench.models import load_model

    return load_model(ModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, max_positions=64))


def run_cases(adapter) -> dict:
    from daca_bench.config import SamplerConfig
    from daca_bench.rl.sampler import sample

    out = {}
    for name, (fields, seed) in CASES.items():
        b = sample(adapter, PROMPTS, SamplerConfig(**fields), seed=seed)
        out[name] = {
            "ids": b.completion_ids,
            "commit_step": b.trajectory.commit_step,
            "commit_logp": b.trajectory.commit_logp,
            "conf": b.trajectory.conf,
            "passes": b.forward_passes,
        }
    return out


if __name__ == "__main__":
    torch.set_num_threads(1)
    adapter = small_model()
    FIXTURE.parent.mkdir(exist_ok=True)
    torch.save({"state": adapter.model.state_dict(), "cases": run_cases(adapter)}, FIXTURE)
    print(f"wrote {FIXTURE} ({FIXTURE.stat().st_size // 1024} KiB)")
