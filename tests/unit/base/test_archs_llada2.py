"""The native LLaDA2.0 (MoE, block diffusion) class against golden numbers from the authors' code
(inclusionAI/dFactory; tests/fixtures/golden/llada2.pt, made by scripts/golden_blocks.py): fp32 logits
without a mask and under the block-causal mask, the two-stream training pass's log-likelihood, loss and
one gradient at 1e-5, the greedy block decode token for token (with and without the exact block cache),
the block-wise likelihood through the adapter, checkpointing, key names and the FSDP2 units."""

import pytest
import torch

from daca_bench.adapter import ModelAdapter
from daca_bench.archs import LLaDA2MoeConfig, LLaDA2MoeModelLM, native_class
from daca_bench.archs.llada2_decode import llada2_generate, transfer_quota
from daca_bench.engine.parallel import shard_units

from repo_paths import FIXTURES

GOLD = torch.load(FIXTURES / "golden" / "llada2.pt")


def _native(train=False):
    model = LLaDA2MoeModelLM(LLaDA2MoeConfig(**GOLD["config"]))
    missing, unexpected = model.load_state_dict(GOLD["state"], strict=True)
    assert not missing and not unexpected
    return model.train(train)


def _two_stream(model):
    """dFactory's training pass: [noisy | clean], its mask and repeated positions; the noisy half's logits."""
    n = GOLD["ids"].shape[1]
    ids = torch.cat([GOLD["noisy"], GOLD["ids"]], dim=1)
    mask = GOLD["train_mask"][None, None].expand(ids.shape[0], -1, -1, -1)
    return model(input_ids=ids, attention_mask=mask, position_ids=GOLD["train_positions"]).logits[:, :n]


def test_logits_equal_the_authors_code():
    model = _native()
    ids = GOLD["ids"]
    n = ids.shape[1]
    block = torch.arange(n) // GOLD["block"]
    allowed = (block[None, :] <= block[:, None])[None, None].expand(ids.shape[0], -1, -1, -1)
    with torch.no_grad():
        full = model(input_ids=ids).logits
        causal = model(input_ids=ids, attention_mask=allowed).logits
    assert full.shape == GOLD["logits"].shape
    assert torch.allclose(full, GOLD["logits"], atol=1e-5, rtol=0)
    assert torch.allclose(causal, GOLD["block_logits"], atol=1e-5, rtol=0)
    assert not torch.allclose(full, GOLD["block_logits"], atol=1e-2)  # the mask matters: the check can fail
    assert not torch.allclose(full, GOLD["logits"] + 1e-3, atol=1e-5, rtol=0)


def test_two_stream_likelihood_loss_and_gradient_equal_the_authors_training_code():
    model = _native()
    hide = GOLD["labels"] != -100
    with torch.no_grad():
        logits = _two_stream(model)
    logp = torch.log_softmax(logits, -1).gather(-1, GOLD["ids"][..., None]).squeeze(-1)
    assert torch.allclose(torch.where(hide, logp, torch.zeros_like(logp)), GOLD["token_logp"], atol=1e-5, rtol=0)
    model.train()
    logits = _two_stream(model)
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), GOLD["labels"].reshape(-1))
    assert abs(ce.item() - GOLD["loss"].item()) < 1e-5
    ce.backward()
    params = dict(model.named_parameters())
    for name, ref in GOLD["grads"].items():
        assert torch.allclose(params[name].grad, ref, atol=1e-5, rtol=1e-4), name


def test_adapter_block_likelihood_equals_the_two_stream_pass():
    """The adapter's block layout (archs/block.py: prompt, noisy completion, clean copies of its earlier blocks)
    scores a prompt of whole blocks exactly as dFactory's [noisy | clean] pass does."""
    model = _native()
    p, B = GOLD["prompt"], GOLD["block"]
    assert p % B == 0
    adapter = ModelAdapter(model, None, GOLD["mask_id"], 93, 94, block_size=B)
    with torch.no_grad():
        logits = adapter.logits(GOLD["noisy"], clean=GOLD["ids"][:, p:])
    logp = torch.log_softmax(logits, -1).gather(-1, GOLD["ids"][..., None]).squeeze(-1)
    hide = GOLD["labels"] != -100
    assert torch.allclose(torch.where(hide, logp, torch.zeros_like(logp)), GOLD["token_logp"], atol=1e-5, rtol=0)


@pytest.mark.parametrize("cache", [False, True])
def test_greedy_block_decode_equals_the_authors_generate(cache):
    model = _native()
    for case in GOLD["decode"]:
        kw = {k: v for k, v in case["kwargs"].items() if k != "temperature"}
        got = llada2_generate(model, case["prompt"], mask_id=GOLD["mask_id"], cache=cache, **kw)
        assert torch.equal(got, case["tokens"]), (case["prompt"], got, case["tokens"])
    assert transfer_quota(4, 3) == [2, 1, 1]
    with pytest.raises(ValueError, match="one prompt"):
        llada2_generate(model, torch.zeros(2, 3, dtype=torch.long))


def test_checkpointing_through_the_standard_api_keeps_the_gradients():
    model = _native(train=True)
    grads = []
    for ckpt in (False, True):
        model.zero_grad()
        if ckpt:
            if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.2x
                model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
            else:  # earlier 5.x and 4.x
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        _two_stream(model).square().mean().backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
    assert getattr(model, "is_activation_checkpointing", None) or model.is_gradient_checkpointing
    assert torch.allclose(grads[0], grads[1], atol=1e-6)


def test_key_names_save_load_and_registration(tmp_path):
    model = _native()
    keys = set(model.state_dict())
    assert {"model.layers.1.mlp.experts.7.down_proj.weight", "model.layers.1.mlp.gate.expert_bias"} <= keys
    assert "model.layers.0.mlp.gate_proj.weight" in keys  # first_k_dense_replace = 1: a dense first layer
    assert native_class("llada2_moe") is LLaDA2MoeModelLM
    assert ModelAdapter(model, None, 95, 93, 94).cache_kind() == "native"
    model.save_pretrained(tmp_path)
    again = LLaDA2MoeModelLM.from_pretrained(tmp_path).eval()
    assert again.config.block_size == GOLD["block"]
    with torch.no_grad():
        assert torch.equal(again(input_ids=GOLD["ids"]).logits, model(input_ids=GOLD["ids"]).logits)
    with pytest.raises(ValueError, match="not supported"):
        LLaDA2MoeConfig(rope_scaling={"type": "linear", "factor": 2.0})


def test_fsdp_units_put_each_expert_set_before_its_layer():
    model = _native()
    names = [type(u).__name__ for u in shard_units(model)]
    assert names.count("LLaDA2MoeExperts") == 2 and names.count("LLaDA2MoeDecoderLayer") == 3
    assert names.index("LLaDA2MoeDecoderLayer") > names.index("LLaDA2MoeExperts")  # inside out
    assert all(n == "LLaDA2MoeExperts" for n in names[:2])


def test_transformers_embedding_accessors_find_the_native_layers():
    """The native classes keep transformers' own get/set_input/output_embeddings (no copies of them): they
    must find each family's embedding and head, as PEFT and resize_token_embeddings use them."""
    from daca_bench.archs import NATIVE
    from daca_bench.testing.paper import FIELDS

    small = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=1, num_attention_heads=4)
    small.update(num_key_value_heads=2, vocab_size=64, pad_token_id=0, bos_token_id=0, eos_token_id=0, mask_token_id=1)
    models = [_native()]
    for family in ("dream", "sdar"):
        cls = NATIVE[family]
        fields = {k: v for k, v in FIELDS[family].items() if k != "model_type"} | small
        models.append(cls(cls.config_class(**fields)))
    for model in models:
        embed = model.model.word_embeddings if hasattr(model.model, "word_embeddings") else model.model.embed_tokens
        assert model.get_input_embeddings() is embed and model.get_output_embeddings() is model.lm_head
        new = torch.nn.Embedding(*embed.weight.shape)
        model.set_input_embeddings(new)
        assert model.get_input_embeddings() is new
