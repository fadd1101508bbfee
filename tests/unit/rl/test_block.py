"""The tiny block-diffusion model (issue 57, docs/method.md section 12): the block-causal forward against a
per-block reference, the two-stream likelihood against per-block canvases and the sampler's record, the
exact block cache against the uncached block decode, SFT's block objective, DPS's scope, the errors, and a
short `daca-bench train` with model.block_size=4."""

import itertools
import json
import math
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from daca_bench.archs.block import block_allowed, block_index
from daca_bench.config import ConfigError, DPSConfig, ModelConfig, SamplerConfig
from daca_bench.models import load_model
from daca_bench.rl.bases import check
from daca_bench.rl.credit import dps_weights
from daca_bench.rl.likelihood import elbo_terms, sml_logprobs
from daca_bench.rl.sampler import pad_prompts, sample
from daca_bench.train.sft import sft_loss

from repo_paths import ROOT

B = 4
PROMPTS = ["12+5=", "3+4=", "100+23="]  # unequal lengths: left padding inside the prompt's blocks


@pytest.fixture(scope="module")
def block():
    torch.set_num_threads(1)  # a shared CPU: one thread is the fastest for the tiny model
    adapter = load_model(ModelConfig(seed=0, block_size=B))
    adapter.model.eval()
    return adapter


def _canvas(adapter, L=12, seed=0):
    ids, mask = pad_prompts(adapter, PROMPTS)
    y = torch.randint(5, 20, (len(PROMPTS), L), generator=torch.Generator().manual_seed(seed))
    return ids, mask, y


def _reference_forward(model, ids, mask, block):
    """BERT layer by layer, each block's queries attending with a plain softmax to the real keys of the blocks
    up to its own (counted back from the end), no mask tensor: the per-block definition of the model."""
    bert, S = model.bert, ids.shape[1]
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    h = bert.embeddings(input_ids=ids, position_ids=pos)
    ends = sorted({S - k * block for k in range(0, S // block + 1)} | {0})[1:] + ([S] if S % block else [])
    starts = [0] + ends[:-1]
    for layer in bert.encoder.layer:
        att = layer.attention.self
        n, hd = att.num_attention_heads, att.attention_head_size
        q, k, v = (f(h).view(h.shape[0], S, n, hd).transpose(1, 2) for f in (att.query, att.key, att.value))
        out = torch.zeros_like(q)
        for lo, hi in zip(starts, ends):
            for r in range(ids.shape[0]):
                keys = mask[r, :hi].bool()
                qq, kk, vv = q[r : r + 1, :, lo:hi], k[r : r + 1, :, :hi][:, :, keys], v[r : r + 1, :, :hi][:, :, keys]
                if kk.shape[2] == 0:  # a block of padding only: its rows are never read
                    continue
                w = (qq @ kk.transpose(-1, -2) / hd**0.5).softmax(-1)
                out[r : r + 1, :, lo:hi] = w @ vv
        a = layer.attention.output(out.transpose(1, 2).reshape(h.shape), h)
        h = layer.output(layer.intermediate(a), a)
    return model.cls(h)


def test_block_index_counts_back_from_the_end():
    assert block_index(10, 4).tolist() == [-3, -3, -2, -2, -2, -2, -1, -1, -1, -1]
    allowed = block_allowed(block_index(6, 2), torch.zeros(6, dtype=torch.bool), torch.ones(1, 6))[0]
    assert allowed.int().tolist() == [
        [1, 1, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0],
        [1, 1, 1, 1, 0, 0],
        [1, 1, 1, 1, 0, 0],
        [1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 1],
    ]


def test_forward_with_the_block_mask_equals_a_per_block_reference(block):
    ids, mask, y = _canvas(block)
    canvas = torch.cat([ids, y], dim=1)
    attn = torch.cat([mask, torch.ones_like(y)], dim=1)
    with torch.no_grad():
        got = block.logits(canvas, attn)
        ref = _reference_forward(block.model, canvas, attn, B)
        full = replace(block, block_size=0).logits(canvas, attn)
    real = attn.bool()
    assert torch.allclose(got[real], ref[real], atol=1e-5)
    assert not torch.allclose(got[real], full[real], atol=1e-3)  # the mask acts: full attention differs
    # a block never sees what follows it: changing the last block leaves every earlier row as it was
    changed = canvas.clone()
    changed[:, -B:] = block.mask_token_id
    with torch.no_grad():
        again = block.logits(changed, attn)
    assert torch.equal(again[:, :-B], got[:, :-B])


def test_two_streams_equal_one_canvas_per_block(block):
    """Each noisy block scored in one two-stream pass = the single canvas [prompt, clean earlier blocks, that
    block noisy], whatever follows it."""
    ids, mask, y = _canvas(block)
    hide = torch.rand(y.shape, generator=torch.Generator().manual_seed(1)) < 0.5
    noisy = torch.where(hide, torch.full_like(y, block.mask_token_id), y)
    attn = torch.cat([mask, torch.ones_like(y)], dim=1)
    with torch.no_grad():
        two = block.logits(torch.cat([ids, noisy], 1), attn, clean=y)[:, ids.shape[1] :]
        for j in range(0, y.shape[1], B):
            canvas = torch.cat([y[:, :j], noisy[:, j : j + B], torch.full_like(y[:, j + B :], block.mask_token_id)], 1)
            one = block.logits(torch.cat([ids, canvas], 1), attn)[:, ids.shape[1] :]
            assert torch.allclose(two[:, j : j + B], one[:, j : j + B], atol=1e-5), j


def test_the_block_likelihood_factorises_and_the_step_merged_one_is_the_record(block):
    """K = 1: each block fully masked behind its clean predecessors, the sum over blocks of the per-block
    passes; causal strata with one per step of a block: exactly the sampler's recorded commit_logp."""
    cfg = SamplerConfig(gen_length=12, block_length=B, steps=12, temperature=0.9, cache="block")
    batch = sample(block, PROMPTS, cfg, seed=3)
    y, P = batch.completion_ids, batch.prompt_ids.shape[1]
    with torch.no_grad():
        k1 = sml_logprobs(block, batch.prompt_ids, batch.prompt_mask, y, k=1)
        step = sml_logprobs(
            block,
            batch.prompt_ids,
            batch.prompt_mask,
            y,
            k=B,
            partition="causal",
            commit_step=batch.trajectory.commit_step,
        )
        total = torch.zeros(len(PROMPTS))
        for j in range(0, 12, B):  # brute force: one canvas per block
            canvas = torch.cat([batch.prompt_ids, y[:, :j], torch.full_like(y[:, j:], block.mask_token_id)], 1)
            logits = block.logits(canvas, torch.cat([batch.prompt_mask, torch.ones_like(y)], 1))[:, P + j : P + j + B]
            total += logits.log_softmax(-1).gather(-1, y[:, j : j + B, None]).squeeze(-1).sum(-1)
    assert torch.allclose(k1.sum(-1), total, atol=1e-4)
    assert torch.allclose(step, batch.trajectory.commit_logp, atol=1e-5)
    assert not torch.allclose(k1, step, atol=1e-3)


def _all_masks(L: int, weight):
    """Every mask of l ~ U{1..L} positions of L with its probability (1/L) / C(L, l) and `weight`(l)."""
    masks, prob, w = [], [], []
    for count in range(1, L + 1):
        for chosen in itertools.combinations(range(L), count):
            row = torch.zeros(L, dtype=torch.bool)
            row[list(chosen)] = True
            masks.append(row)
            prob.append(1 / L / math.comb(L, count))
            w.append(weight(count))
    return torch.stack(masks), torch.tensor(prob, dtype=torch.float64), torch.tensor(w)


@pytest.mark.parametrize("L,pad", [(8, 0), (6, 2)])
def test_the_whole_continuation_elbo_is_the_block_wise_elbo_in_expectation(block, L, pad):
    """lm-eval's loglikelihood on a block model (eval/lmeval.py): one draw of l ~ U{1..L} over the whole
    continuation, weight L / l, every canvas with its clean stream (elbo_terms). Its exact expectation (every
    mask enumerated) is the block-wise ELBO sum_b E_{l_b ~ U{1..B_b}} (B_b / l_b) sum_{k masked} log p(y_k | x,
    y_<b clean, y_b noisy), each block computed on its own canvas; a continuation cut short of a block is padded
    with masks (the marginal of its tokens). Without the clean stream (earlier blocks as noisy as the draw left
    them) the expectation differs: the test can fail."""
    ids, mask, y = _canvas(block, L=L, seed=L)
    ids, mask, y = ids[:2], mask[:2], y[:2]
    n, P = len(y), ids.shape[1]
    masks, prob, w = _all_masks(L, lambda count: L / count)
    D = len(masks)
    with torch.no_grad():
        terms = elbo_terms(block, ids, mask, y, masks[:, None].expand(D, n, L), w[:, None].expand(D, n), pad=pad)
        whole = (terms.double().sum(-1) * prob[:, None]).sum(0)
        one_stream = torch.zeros(n, dtype=torch.float64)
        for d in range(D):
            canvas = torch.where(masks[d], block.mask_token_id, y)
            canvas = torch.cat([ids, canvas, torch.full((n, pad), block.mask_token_id)], 1)
            logits = block.logits(canvas, torch.cat([mask, torch.ones(n, L + pad, dtype=mask.dtype)], 1))  # one stream
            logp = logits[:, P : P + L].log_softmax(-1).gather(-1, y[..., None]).squeeze(-1).double()
            one_stream += prob[d] * w[d] * (logp * masks[d]).sum(-1)
        blockwise = torch.zeros(n, dtype=torch.float64)
        full = torch.cat([y, torch.full((n, pad), block.mask_token_id)], 1)
        for hi in range(L + pad, 0, -B):  # blocks counted back from the canvas's end
            lo, top = hi - B, min(hi, L)  # the block's scored positions: lo .. top - 1
            sub, sub_prob, sub_w = _all_masks(top - lo, lambda count, m=top - lo: m / count)
            for d in range(len(sub)):
                canvas = full.clone()
                canvas[:, lo:top][:, sub[d]] = block.mask_token_id
                canvas[:, top:] = block.mask_token_id  # the padding and every later block: not seen anyway
                logits = block.logits(torch.cat([ids, canvas], 1), torch.cat([mask, torch.ones_like(canvas)], 1))
                logp = logits[:, P + lo : P + top].log_softmax(-1).gather(-1, y[:, lo:top, None]).squeeze(-1)
                blockwise += sub_prob[d] * sub_w[d] * (logp.double() * sub[d]).sum(-1)
    assert torch.allclose(whole, blockwise, rtol=1e-6, atol=1e-5), (whole, blockwise)
    assert (whole - one_stream).abs().max() > 1e-3, (whole, one_stream)


@pytest.mark.parametrize("temperature,threshold", [(0.0, None), (0.9, None), (0.9, 0.2)])
def test_the_cached_block_decode_is_the_uncached_one(block, temperature, threshold):
    cfg = SamplerConfig(gen_length=12, block_length=B, steps=12, temperature=temperature, threshold=threshold)
    plain = sample(block, PROMPTS, cfg, seed=[5, 6, 7])
    cached = sample(block, PROMPTS, replace(cfg, cache="block"), seed=[5, 6, 7])
    assert torch.equal(plain.completion_ids, cached.completion_ids) and plain.texts == cached.texts
    a, b = plain.trajectory, cached.trajectory
    assert torch.equal(a.commit_step, b.commit_step) and plain.forward_passes == cached.forward_passes
    assert torch.allclose(a.commit_logp, b.commit_logp, atol=1e-5)
    assert torch.equal(a.conf.isnan(), b.conf.isnan()) and torch.allclose(
        a.conf.nan_to_num(), b.conf.nan_to_num(), atol=1e-5
    )
    # the record per block: a step's confidences are its own block's, and the block index is recorded
    assert torch.equal(a.block, (torch.arange(12) // B).expand(3, -1))
    seen = ~a.conf.isnan()  # (N, T, L)
    for t in range(a.conf.shape[1]):
        blocks = a.block[:, None, :].expand_as(seen)[:, t][seen[:, t]]
        assert blocks.unique().numel() <= 1


def test_sft_loss_is_the_block_objective(block):
    """sft_loss on a block model = the 1/t-weighted cross-entropy of each block's masked tokens, each read
    from its own canvas with the earlier blocks clean; gradients reach the weights."""
    ids, mask, y = _canvas(block)
    loss, _ = sft_loss(block, ids, mask, y, torch.Generator().manual_seed(2), 1e-3)
    gen = torch.Generator().manual_seed(2)
    t = 1e-3 + (1 - 1e-3) * torch.rand(len(y), generator=gen)
    masked = torch.rand(y.shape, generator=gen) < t[:, None]
    noisy = torch.where(masked, torch.full_like(y, block.mask_token_id), y)
    ref = 0.0
    for j in range(0, y.shape[1], B):
        canvas = torch.cat([ids, y[:, :j], noisy[:, j : j + B], noisy[:, j + B :]], 1)
        logits = block.logits(canvas, torch.cat([mask, torch.ones_like(y)], 1))[:, ids.shape[1] + j :][:, :B]
        ce = F.cross_entropy(logits.transpose(1, 2), y[:, j : j + B], reduction="none")
        ref = ref + (ce * masked[:, j : j + B] / t[:, None]).sum()
    assert torch.allclose(loss, ref / y.numel(), atol=1e-5)
    loss.backward()
    assert block.model.bert.embeddings.word_embeddings.weight.grad.abs().sum() > 0
    block.model.zero_grad(set_to_none=True)


def test_dps_scope_block_normalises_each_block():
    from daca_bench.rl.sampler import Trajectory

    g = torch.Generator().manual_seed(0)
    n, L = 4, 8
    traj = Trajectory(
        torch.randint(1, 9, (n, L), generator=g),
        -torch.rand(n, L, generator=g),
        torch.rand(n, 8, L, generator=g),
        block=(torch.arange(L) // B).expand(n, -1),
    )
    valid = torch.ones(n, L, dtype=torch.bool)
    valid[0, 6:] = False
    for score in ("surprise", "commit_time"):
        cfg = DPSConfig(enabled=True, score=score, norm="zscore")
        whole = dps_weights(traj, valid, cfg)
        per = dps_weights(traj, valid, replace(cfg, scope="block"))
        for j in range(0, L, B):
            v = valid[:, j : j + B]
            means = (per[:, j : j + B] * v).sum(1) / v.sum(1)
            assert torch.allclose(means, torch.ones(n), atol=1e-5)
        assert not torch.allclose(whole, per)
        assert torch.allclose((whole * valid).sum(1) / valid.sum(1), torch.ones(n), atol=1e-5)
    with pytest.raises(ValueError, match="dps.scope"):
        dps_weights(traj, valid, DPSConfig(enabled=True, scope="sentence"))
    with pytest.raises(ValueError, match="block index"):
        dps_weights(replace(traj, block=None), valid, DPSConfig(enabled=True, scope="block"))


def test_block_settings_that_cannot_run_are_one_line_errors(block, tiny, tmp_path):
    with pytest.raises(ConfigError, match="block_length"):
        sample(block, PROMPTS, SamplerConfig(gen_length=8, block_length=8, steps=8))
    with pytest.raises(ConfigError, match="block"):
        sample(block, PROMPTS, SamplerConfig(gen_length=8, block_length=B, steps=8, cache="prefix"))
    with pytest.raises(ConfigError, match="no block cache"):
        sample(tiny, PROMPTS, SamplerConfig(gen_length=8, block_length=B, steps=8, cache="block"))
    with pytest.raises(ConfigError, match="model.block_size"):
        load_model(ModelConfig(block_size=-1))
    block.save(tmp_path / "m")
    assert json.loads((tmp_path / "m" / "daca_adapter.json").read_text())["block_size"] == B
    assert load_model(ModelConfig(name=str(tmp_path / "m"))).block_size == B
    with pytest.raises(ConfigError, match="block size 4"):
        load_model(ModelConfig(name=str(tmp_path / "m"), block_size=2))


def test_daca_bench_train_runs_a_block_model_end_to_end(tmp_path):
    from daca_bench.cli import main

    out = tmp_path / "run"
    rc = main(
        [
            "train",
            "--output-dir",
            str(out),
            "--no-progress",
            "model.block_size=4",
            "train.task=even_length",
            "train.steps=2",
            "train.prompts_per_step=2",
            "train.num_generations=2",
            "train.n_eval=4",
            "train.threads=1",
            "train.mu=2",
            "rollout.gen_length=8",
            "rollout.block_length=4",
            "rollout.steps=4",
            "rollout.cache=block",
            "eval.gen_length=8",
            "eval.block_length=4",
            "eval.steps=4",
            "eval.cache=block",
            "dps.enabled=true",
            "dps.scope=block",
            "sml.k=2",
            "sml.partition=causal",
        ]
    )
    assert rc == 0
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and all(r["loss"] == r["loss"] for r in rows)
    assert json.loads((out / "final" / "daca_adapter.json").read_text())["block_size"] == 4
    assert 0 <= json.loads((out / "summary.json").read_text())["test_accuracy"] <= 1


def test_the_tiny_block_preset_is_fresh_and_its_committed_design_is_what_it_makes(committed_seeds, tmp_path):

    from daca_bench.cli import main
    from daca_bench.experiments.analysis.design import read_design
    from daca_bench.experiments.grid.pipeline import sft_config, tiny_cells
    from daca_bench.experiments.grid.presets import PRESETS

    preset = PRESETS["tiny-block"]
    cells = tiny_cells(preset, {f: {"folder": "a"} for f in preset.families})
    arms = {(c.axes["loss.base"], c.axes["variant"]) for c in cells}
    assert arms == {("grpo", v) for v in ("baseline", "+DPS", "+SML", "+DACA")} | {
        ("tracerl", "baseline"),
        ("tracerl", "+DPS"),
    }
    assert len(cells) == 6 * (32 + 16)
    for c in cells:  # every cell runs: the field's block method at loss.beta 0 (its KL is to the old policy)
        check(c.config)
        if c.axes["loss.base"] == "tracerl":
            assert (c.config.loss.beta, c.config.sml.p_mask_prompt, c.config.loss.trace_kl) == (0.0, 0.0, 0.01)
        else:
            assert c.config.loss.beta == 0.04
    seeds = {c.config.train.seed for c in cells}
    assert seeds == set(range(120, 152)) and not seeds & committed_seeds(skip="tiny-block")
    for fam in preset.families.values():
        sft = sft_config(preset, fam)
        assert sft.model.block_size == fam.block and sft.sampler.block_length == fam.block
        assert (sft.sampler.steps // (sft.sampler.gen_length // fam.block)) >= 2  # more than one step per block
        for c in (c for c in cells if c.config.train.task == fam.task):
            assert c.config.rollout.block_length == fam.block and c.config.rollout.cache == "block"
            assert c.config.dps.scope == "block" and c.config.train.test_seed == 4
    committed = ROOT / "results" / "tiny-block" / "design.json"
    assert (
        main(["reproduce", "--preset", "tiny-block", "--design-only", "--output-dir", str(tmp_path), "--allow-dirty"])
        == 0
    )
    now, fixed = read_design(tmp_path), read_design(committed.parent)
    loose = ("commit", "code_tree", "written", "date")
    assert {k: v for k, v in now.items() if k not in loose} == {k: v for k, v in fixed.items() if k not in loose}
