"""`sampler.cache` (none | prefix | dual): the KV-cached pass of the tiny model and the native
LLaDA and Dream classes, the sampler with the cache on (record complete, the gap to the causal
likelihood), and `cache=none` still decoding token for token as before (tests/support/sampler_golden.py)."""

import sys

import pytest
import torch

from daca_bench.archs.common import KVCache
from daca_bench.config import SamplerConfig
from daca_bench.errors import ConfigError
from daca_bench.rl.sampler import pad_prompts, replay_commit_logp, sample

from repo_paths import ROOT
from sampler_golden import CASES, FIXTURE, PROMPTS, run_cases, small_model  # tests/support

FAMILIES = ["tiny", "llada", "dream"]


@pytest.fixture(scope="module")
def adapters(tiny, tmp_path_factory):
    from daca_bench.models import load_pretrained
    from daca_bench.testing.paper import write_paper_folder

    out = {"tiny": tiny}
    for family in ("llada", "dream"):
        out[family] = load_pretrained(str(write_paper_folder(family, tmp_path_factory.mktemp(family))))
    return out


def _canvas(adapter, n_masks=12):
    ids, mask = pad_prompts(adapter, ["12+5=", "3-1+20=", "7="])  # left-padded rows
    x = torch.cat([ids, torch.full((len(ids), n_masks), adapter.mask_token_id)], dim=1)
    x[:, ids.shape[1] : ids.shape[1] + 3] = ids[:, -3:]  # a few committed completion tokens
    return x, torch.cat([mask, torch.ones((len(ids), n_masks), dtype=torch.long)], dim=1)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_window_over_an_unchanged_canvas_equals_the_full_pass(adapters, family):
    adapter = adapters[family]
    x, attn = _canvas(adapter)
    S = x.shape[1]
    with torch.no_grad():
        full = adapter.logits(x, attn)  # (N, S, V)
        cache = KVCache()
        filled = adapter.forward_cached(x, attn, cache)
        assert torch.allclose(filled, full, atol=1e-5)
        for lo, hi in ((S - 12, S), (S - 8, S - 4), (1, 5)):
            got = adapter.forward_cached(x, attn, cache, window=(lo, hi))
            assert got.shape == (x.shape[0], hi - lo, full.shape[-1])
            assert torch.allclose(got, full[:, lo:hi], atol=1e-5), (family, lo, hi)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_window_reads_the_cached_keys_not_the_current_canvas(adapters, family):
    adapter = adapters[family]
    x, attn = _canvas(adapter)
    S = x.shape[1]
    with torch.no_grad():
        cache = KVCache()
        adapter.forward_cached(x, attn, cache)
        changed = x.clone()
        changed[:, S - 12] = adapter.encode(["9"])[0][0]  # outside the window: its keys stay the cached ones
        stale = adapter.forward_cached(changed, attn, cache, window=(S - 8, S))
        fresh = adapter.logits(changed, attn)[:, S - 8 :]
        before = adapter.logits(x, attn)[:, S - 8 :]
    assert torch.allclose(stale, before, atol=1e-5)
    assert not torch.allclose(stale, fresh, atol=1e-5)  # the check can fail


def test_a_model_without_a_cache_is_one_error_naming_the_key(tiny):
    from daca_bench.adapter import ModelAdapter

    class Plain(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask=None):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask)

    other = ModelAdapter(Plain(tiny.model), tiny.tokenizer, tiny.mask_token_id, tiny.eos_token_id, tiny.pad_token_id)
    assert other.cache_kind() is None and tiny.cache_kind() == "bert"
    with pytest.raises(ConfigError, match=r"sampler.cache: Plain .* set sampler.cache=none"):
        sample(other, PROMPTS, SamplerConfig(gen_length=8, block_length=4, steps=8, cache="prefix"))
    assert sample(other, PROMPTS[:1], SamplerConfig(gen_length=8, block_length=4, steps=8)).forward_passes == 8


def test_an_unknown_cache_is_one_error(tiny):
    with pytest.raises(ConfigError, match="sampler.cache='prefx'.*did you mean prefix"):
        sample(tiny, PROMPTS, SamplerConfig(gen_length=8, block_length=4, steps=8, cache="prefx"))


def test_cache_none_decodes_as_the_sampler_did_before_the_cache():
    torch.set_num_threads(1)  # the fixture was written with one thread: float sums in the same order
    adapter = small_model()
    gold = torch.load(FIXTURE)
    adapter.model.load_state_dict(gold["state"])
    got = run_cases(adapter)  # SamplerConfig's default cache is none
    assert SamplerConfig().cache == "none"
    for name in CASES:
        want, have = gold["cases"][name], got[name]
        assert have["passes"] == want["passes"], name
        assert torch.equal(have["ids"], want["ids"]) and torch.equal(have["commit_step"], want["commit_step"]), name
        # tokens and steps exactly; the floats to rounding: fp32 kernels differ in their last bits
        # across CPU kinds (the fixture came from an Intel Xeon; an AMD EPYC is 4.8e-7 off)
        torch.testing.assert_close(have["commit_logp"], want["commit_logp"], rtol=0, atol=1e-5, msg=name)
        torch.testing.assert_close(have["conf"], want["conf"], rtol=0, atol=1e-6, equal_nan=True, msg=name)
    torch.set_num_threads(2)


def _record_complete(batch, mask_id, T):
    traj = batch.trajectory
    assert not (batch.completion_ids == mask_id).any()
    assert traj.commit_step.min() >= 1 and traj.commit_step.max() <= T
    assert torch.isfinite(traj.commit_logp).all() and (traj.commit_logp <= 0).all()
    steps = torch.arange(1, traj.conf.shape[1] + 1)[None, :, None]
    still_masked = traj.commit_step[:, None, :] >= steps  # (N, T, L): masked before step t
    assert torch.equal(~torch.isnan(traj.conf), still_masked)  # a value for every masked position, every step
    assert ((traj.conf[still_masked] > 0) & (traj.conf[still_masked] <= 1)).all()


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("cache", ["prefix", "dual"])
@pytest.mark.parametrize("threshold", [None, 0.02])
def test_the_record_is_complete_with_the_cache_on(adapters, family, cache, threshold):
    adapter = adapters[family]
    cfg = SamplerConfig(gen_length=12, block_length=4, steps=12, temperature=0.9, cache=cache, threshold=threshold)
    batch = sample(adapter, PROMPTS, cfg, seed=2)
    _record_complete(batch, adapter.mask_token_id, batch.forward_passes)
    if threshold is None:
        assert batch.forward_passes == 12
    again = sample(adapter, PROMPTS, cfg, seed=2)
    assert torch.equal(batch.completion_ids, again.completion_ids)


@pytest.mark.parametrize("family", FAMILIES)
def test_dual_keeps_the_suffix_confidence_of_the_blocks_first_pass(adapters, family):
    adapter = adapters[family]
    cfg = SamplerConfig(gen_length=8, block_length=4, steps=8, cache="dual")
    conf = sample(adapter, PROMPTS, cfg, seed=0).trajectory.conf  # (N, 8, 8): 4 steps per block
    assert torch.equal(conf[:, 1:4, 4:], conf[:, :1, 4:].expand(-1, 3, -1))  # suffix not recomputed in block 1
    prefix = sample(adapter, PROMPTS, SamplerConfig(gen_length=8, block_length=4, steps=8, cache="prefix"), seed=0)
    assert not torch.equal(prefix.trajectory.conf[:, 1:4, 4:], prefix.trajectory.conf[:, :1, 4:].expand(-1, 3, -1))


@pytest.mark.parametrize("family", FAMILIES)
def test_cached_commit_logp_against_the_causal_likelihood(adapters, family):
    """With the cache off the causal likelihood at K = steps equals commit_logp (tests/unit/rl/test_sampler.py);
    with it on they differ by what the reused keys missed: the first step of each block is exact."""
    adapter = adapters[family]
    for cache in ("prefix", "dual"):
        cfg = SamplerConfig(gen_length=12, block_length=4, steps=12, temperature=1.0, cache=cache)
        batch = sample(adapter, PROMPTS, cfg, seed=1)
        gap = (replay_commit_logp(adapter, batch) - batch.trajectory.commit_logp).abs()
        first = (batch.trajectory.commit_step - 1) % 4 == 0  # committed at a block's first step: a full pass
        assert torch.allclose(gap[first], torch.zeros_like(gap[first]), atol=1e-5), (family, cache)
        assert gap[~first].max() > 1e-6, (family, cache)  # later steps read reused keys: not exact


def test_prefix_with_one_step_per_block_is_the_uncached_sampler(tiny):
    """Every step is a block's first step, a full pass: prefix and dual decode exactly as none."""
    base = SamplerConfig(gen_length=8, block_length=2, steps=4, temperature=0.8)
    ref = sample(tiny, PROMPTS, base, seed=4)
    for cache in ("prefix", "dual"):
        got = sample(tiny, PROMPTS, SamplerConfig(**{**base.__dict__, "cache": cache}), seed=4)
        assert torch.equal(got.completion_ids, ref.completion_ids)
        assert torch.allclose(got.trajectory.commit_logp, ref.trajectory.commit_logp, atol=1e-5)


def test_commit_entropy_is_the_entropy_at_the_commit_step(tiny):
    """Replaying the canvas of each token's commit step gives the recorded entropy (cache off)."""
    cfg = SamplerConfig(gen_length=8, block_length=4, steps=8, temperature=1.0)
    batch = sample(tiny, PROMPTS, cfg, seed=3)
    traj = batch.trajectory
    assert traj.commit_entropy.shape == traj.commit_logp.shape
    with torch.no_grad():
        for t in range(1, 9):
            canvas = torch.where(traj.commit_step < t, batch.completion_ids, tiny.mask_token_id)
            ids = torch.cat([batch.prompt_ids, canvas], 1)
            logp = tiny.logits(ids, batch.attention_mask)[:, batch.prompt_ids.shape[1] :].float().log_softmax(-1)
            want = -(logp.exp() * logp).sum(-1)  # (N, L)
            here = traj.commit_step == t
            assert torch.allclose(traj.commit_entropy[here], want[here], atol=1e-4)
    assert (traj.commit_entropy >= -1e-6).all() and (traj.commit_entropy <= torch.log(torch.tensor(100.0)) + 1e-4).all()


def test_the_uncached_sampler_is_llada_s_generate_token_for_token(tiny):
    """The benchmark's reference (LLaDA's algorithm: float64 softmax, top-k per block, no record)
    and `sample` at temperature 0 commit the same tokens (the held-out sampler check)."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.decoding.bench_rollout_cache import reference_generate

    ids, mask = pad_prompts(tiny, PROMPTS)
    want = reference_generate(tiny, ids, mask, 16, 4, 8)
    got = sample(tiny, PROMPTS, SamplerConfig(gen_length=16, block_length=4, steps=8), seed=0)
    assert torch.equal(got.completion_ids, want)


# ---- tiny-cache: the rollout setting as an ablation axis ---------------------------------------
def test_tiny_cache_s_cells_differ_only_in_their_rollouts_and_name_their_setting():
    from dataclasses import replace

    from daca_bench.experiments.grid.pipeline import tiny_cells
    from daca_bench.experiments.grid.presets import PRESETS

    cells = tiny_cells(PRESETS["tiny-cache"], {"json": {"folder": "/start"}})
    assert len(cells) == 6 * 2 * 4 and len({c.name for c in cells}) == len(cells)
    by = {(c.axes["setting"], c.axes["variant"], c.axes["train.seed"]): c for c in cells}
    plain = by[("none", "+DACA", 0)].config
    assert (plain.rollout.cache, plain.rollout.threshold, plain.rollout.block_length) == ("none", None, 7)
    for (setting, variant, seed), c in by.items():
        cache, _, th = setting.partition(" th=")
        assert (c.config.rollout.cache, c.config.rollout.threshold) == (cache, float(th) if th else None)
        assert (
            c.config.eval == plain.eval
            and c.config.eval.cache == "none"
            and f"setting={setting.replace(' ', '_')}" in c.name
        )
        same = by[("none", variant, seed)].config  # the uncached cell of its arm: equal but for the rollouts
        assert replace(c.config, rollout=same.rollout) == same


def test_the_table_gives_each_setting_its_own_block(tmp_path):
    import json

    from daca_bench.experiments.analysis.results import load_results

    for setting in ("none", "prefix"):
        for variant, k in (("baseline", 1), ("+DACA", 4)):
            cell = tmp_path / f"{setting}_{variant}"
            cell.mkdir()
            (cell / "config.json").write_text(
                json.dumps(
                    {
                        "train": {"task": "json_tiny", "seed": 0},
                        "loss": {"base": "grpo"},
                        "dps": {"enabled": k == 4},
                        "sml": {"k": k},
                    }
                )
            )
            (cell / "axes.json").write_text(json.dumps({"variant": variant, "setting": setting}))
            (cell / "summary.json").write_text(json.dumps({"test_accuracy": 0.5}))
    df = load_results(tmp_path)
    assert sorted(set(df["family"])) == ["json [none]", "json [prefix]"]
    from daca_bench.experiments.analysis.results import paper_gain

    assert paper_gain("json [prefix]") == paper_gain("json") == 5.9
