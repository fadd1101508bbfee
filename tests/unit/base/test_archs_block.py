"""The native SDAR class (daca_bench/archs/sdar.py) against golden numbers from the published SDAR
code (tests/fixtures/golden/sdar.pt, made by scripts/golden_models.py --sdar): block-causal logits and
a padded batch at 1e-5, the training forward's two-stream likelihood and its gradient through the
adapter's block layout (archs/block.py) at 1e-5, and the published generator's greedy block decodes
token for token, with the exact block KV cache and without; checkpointing, bf16, save/load, loading."""

import json

import pytest
import torch

from daca_bench.adapter import ModelAdapter
from daca_bench.archs import SDARConfig, SDARModelLM, block_size_of
from daca_bench.archs.common import KVCache

from repo_paths import FIXTURES

GOLD = torch.load(FIXTURES / "golden" / "sdar.pt")
B = GOLD["config"]["block_size"]
MASK = GOLD["config"]["mask_token_id"]


def _native():
    model = SDARModelLM(SDARConfig(**GOLD["config"])).eval()
    missing, unexpected = model.load_state_dict(GOLD["state"], strict=True)
    assert not missing and not unexpected
    return model


def test_logits_equal_the_published_code():
    model = _native()
    ids = GOLD["ids"]
    published = torch.tril(torch.ones(3, 3)).repeat_interleave(B, 0).repeat_interleave(B, 1)[None]  # generate.py's form
    with torch.no_grad():
        own = model(input_ids=ids).logits  # None: block-causal from the positions
        given = model(input_ids=ids, attention_mask=published).logits
    assert torch.allclose(own, GOLD["logits"], atol=1e-5, rtol=0)
    assert torch.allclose(given, GOLD["logits"], atol=1e-5, rtol=0)
    assert not torch.allclose(own, GOLD["logits"] + 1e-3, atol=1e-5, rtol=0)  # the check can fail
    with torch.no_grad():  # full attention is a different model: the block mask is honoured
        full = model(input_ids=ids, attention_mask=torch.ones(2, 1, 3 * B, 3 * B, dtype=torch.bool)).logits
    assert not torch.allclose(full[:, :-B], GOLD["logits"][:, :-B], atol=1e-3)


def test_a_left_padded_row_equals_the_published_code_and_itself_unpadded():
    model = _native()
    with torch.no_grad():
        got = model(input_ids=GOLD["padded"], attention_mask=GOLD["mask"], position_ids=GOLD["padded_positions"]).logits
    assert torch.allclose(got[0], GOLD["padded_logits"][0], atol=1e-5, rtol=0)
    assert torch.allclose(got[1, B:], GOLD["padded_logits"][1, B:], atol=1e-5, rtol=0)
    assert torch.allclose(got[1, B:], GOLD["logits"][1], atol=1e-5, rtol=0)


def test_training_likelihood_and_gradient_equal_the_published_two_stream_forward():
    """SDAR's training forward (the noisy copy beside the clean sequence, each noisy block seeing the
    clean earlier blocks) is the adapter's block layout with the clean completion: the same -log p / p_mask."""
    model = _native()
    adapter = ModelAdapter(model, None, MASK, 94, 94, source="sdar", block_size=B)
    labels, masked = GOLD["labels"], GOLD["masked"]
    logits = adapter.logits(GOLD["noisy"], None, clean=GOLD["ids"][:, B:])  # the prompt is the first block
    logp = torch.log_softmax(logits.float(), -1).gather(-1, GOLD["ids"][..., None])[..., 0]
    rows = -logp[masked] / GOLD["p_mask"]
    assert torch.allclose(rows, GOLD["rows"], atol=1e-5, rtol=0)
    loss = rows.sum() / (labels != -100).sum()
    assert abs(loss.item() - GOLD["loss"].item()) < 1e-5
    loss.backward()
    params = dict(model.named_parameters())
    for name, ref in GOLD["loss_grads"].items():
        assert torch.allclose(params[name].grad, ref, atol=1e-5, rtol=1e-4), name
    assert not torch.allclose(rows, GOLD["rows"] * 1.001, atol=1e-5, rtol=0)


def _transfer(strategy, conf, mask, n):
    """generate.py's choice of the positions to unmask (one row)."""
    out = torch.zeros_like(mask)
    if strategy == "sequential":
        first = int(mask.nonzero()[0, 0])
        out[first : first + n] = True
        return out
    conf = torch.where(mask, conf, -torch.inf)
    if strategy == "low_confidence_dynamic" and int((conf > 0.85).sum()) >= n:
        return conf > 0.85
    out[torch.topk(conf, n).indices] = True
    return out


def _decode(model, run, cached: bool) -> torch.Tensor:
    """The published generator's loop on the native class: the finished blocks in an exact KV cache
    (a window pass per step, one more that stores the finished block), or the whole canvas each step."""
    prompt, steps = run["prompt"], run["steps"]
    P = prompt.shape[1]
    blocks = (P + 8 + B - 1) // B
    x = torch.full((1, blocks * B), MASK)
    x[:, :P] = prompt
    n = torch.full((steps,), B // steps) + (torch.arange(steps) < B % steps)
    kv = KVCache()
    if cached:
        model(input_ids=x[:, : P // B * B], past_key_values=kv)
    for b in range(P // B, blocks):
        lo, hi = b * B, (b + 1) * B
        for step in range(steps + 1):
            mask = x[0, lo:hi] == MASK
            if cached:
                kv.window = (lo, hi)
            if not mask.any():
                if cached:
                    model(input_ids=x[:, lo:hi], past_key_values=kv)
                break
            if cached:
                logits = model(input_ids=x[:, lo:hi], past_key_values=kv).logits[0]
            else:
                logits = model(input_ids=x[:, :hi]).logits[0, lo:hi]
            probs = torch.softmax(logits, -1)
            conf, tok = probs.max(-1)
            if not run["argmax_sampler"]:  # top_k=1: the published sampler's probability is 1
                conf = torch.ones_like(conf)
            pick = _transfer(run["strategy"], conf, mask, int(n[step]))
            x[0, lo:hi][pick] = tok[pick]
    return x


@pytest.mark.parametrize("cached", [True, False])
def test_greedy_block_decode_equals_the_published_generator(cached):
    model = _native()
    with torch.no_grad():
        for run in GOLD["decodes"]:
            got = _decode(model, run, cached)
            assert torch.equal(got, run["tokens"]), (run["strategy"], got.tolist(), run["tokens"].tolist())


def test_checkpointing_bf16_and_save_load(tmp_path):
    model = _native().train()
    grads = []
    for ckpt in (False, True):
        model.zero_grad()
        if ckpt:
            if hasattr(model, "activation_checkpointing_enable"):
                model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
            else:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        (model(input_ids=GOLD["ids"]).logits * GOLD["weights"]).sum().backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
    assert getattr(model, "is_activation_checkpointing", None) or model.is_gradient_checkpointing
    assert torch.allclose(grads[0], grads[1], atol=1e-6)
    half = SDARModelLM(model.config).to(torch.bfloat16).eval()
    half.load_state_dict({k: v.bfloat16() for k, v in GOLD["state"].items()})
    with torch.no_grad():
        low = half(input_ids=GOLD["ids"]).logits.float()
    assert (low - GOLD["logits"]).abs().max() < 0.1
    model.eval().save_pretrained(tmp_path)
    again = SDARModelLM.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        assert torch.equal(again(input_ids=GOLD["ids"]).logits, model(input_ids=GOLD["ids"]).logits)


def test_published_config_loads_natively_with_its_block_size(tmp_path):
    """A folder in the published layout (auto_map, flex attention, extra fields) loads through
    load_pretrained without remote code; the adapter takes its block size from the config."""
    from daca_bench.models import load_pretrained
    from daca_bench.testing.paper import paper_tokenizer

    model = _native()
    model.save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg.update(
        auto_map={
            "AutoConfig": "configuration_sdar.SDARConfig",
            "AutoModelForCausalLM": "modeling_sdar.SDARForCausalLM",
        },
        attn_implementation="flex_attention",
        fuse_cross_entropy=True,
        micro_forward=False,
    )
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    paper_tokenizer("dream", compact=True).save_pretrained(tmp_path)
    adapter = load_pretrained(str(tmp_path))
    assert type(adapter.model) is SDARModelLM and adapter.block_size == B == block_size_of(adapter.model.config)
    assert adapter.cache_kind() == "native" and not adapter.shift_logits
    with torch.no_grad():
        assert torch.allclose(adapter.model(input_ids=GOLD["ids"]).logits, GOLD["logits"], atol=1e-5)
    with pytest.raises(ValueError, match="rope_scaling"):
        SDARConfig(**{**GOLD["config"], "rope_scaling": {"type": "yarn", "factor": 4.0}})


@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_the_harness_sampler_decodes_sdar_with_the_exact_block_cache(temperature):
    """rl/sampler.py on the native class (block_step's windows, KVCache): the cached decode is the uncached one."""
    from dataclasses import replace

    from daca_bench.config import SamplerConfig
    from daca_bench.rl.sampler import sample
    from daca_bench.testing.paper import paper_adapter

    adapter = paper_adapter("sdar", seed=1, compact=True)
    adapter.model.eval()
    assert adapter.block_size == B
    cfg = SamplerConfig(gen_length=12, block_length=B, steps=12, temperature=temperature)
    prompts = ["12+5=", "3+4=", "100+23="]  # unequal lengths: left padding
    plain = sample(adapter, prompts, cfg, seed=[5, 6, 7])
    cached = sample(adapter, prompts, replace(cfg, cache="block"), seed=[5, 6, 7])
    assert torch.equal(plain.completion_ids, cached.completion_ids)
    assert torch.allclose(plain.trajectory.commit_logp, cached.trajectory.commit_logp, atol=1e-5)
    assert plain.forward_passes == cached.forward_passes


def test_tied_embeddings_as_sdar_1_7b_publishes_them(tmp_path):
    """SDAR-1.7B-Chat ties its output layer to the embedding (tie_word_embeddings: true, no lm_head.weight in its
    safetensors): the native class loads it with one shared matrix, its logits are hidden @ E^T, and a
    gradient step moves both uses at once."""
    from safetensors.torch import load_file, save_file

    from daca_bench.models import load_pretrained
    from daca_bench.testing.paper import write_paper_folder

    folder = write_paper_folder("sdar", tmp_path / "tied", compact=True, tie_word_embeddings=True)
    weights = load_file(folder / "model.safetensors")
    weights.pop("lm_head.weight", None)  # the published layout: the embedding only
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    model = load_pretrained(str(folder)).model.eval()
    assert model.config.tie_word_embeddings
    emb = model.get_input_embeddings().weight
    assert model.get_output_embeddings().weight is emb and torch.equal(emb, weights["model.embed_tokens.weight"])
    ids = torch.tensor([[5, 6, 7, 8, 9, 10, 11, 12]])
    seen = []
    hook = model.model.norm.register_forward_hook(lambda mod, args, out: seen.append(out))
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    hook.remove()
    assert torch.allclose(logits, seen[0] @ emb.T, atol=1e-5)
    model.train()
    model(input_ids=ids).logits[0, -1, 3].backward()
    grad = emb.grad.clone()
    assert grad[3].abs().sum() > 0 and grad[ids[0]].abs().sum() > 0  # the output row and the input rows
