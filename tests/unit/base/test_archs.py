"""The native LLaDA and Dream classes against golden numbers from the published code
(tests/fixtures/golden, made by scripts/golden_models.py): fp32 logits at 1e-5 on unpadded
rows, one gradient, both padding behaviours, checkpointing, bf16 and the key names."""

import pytest
import torch

from daca_bench.archs import DreamConfig, DreamModel, LLaDAConfig, LLaDAModelLM

from repo_paths import FIXTURES

GOLDEN = FIXTURES / "golden"
CLASSES = {"llada": (LLaDAConfig, LLaDAModelLM), "dream": (DreamConfig, DreamModel)}


def _native(family):
    gold = torch.load(GOLDEN / f"{family}.pt")
    config_cls, model_cls = CLASSES[family]
    model = model_cls(config_cls(**gold["config"])).eval()
    missing, unexpected = model.load_state_dict(gold["state"], strict=True)
    assert not missing and not unexpected
    return model, gold


@pytest.mark.parametrize("family", ["llada", "dream"])
def test_logits_equal_the_original_code(family):
    model, gold = _native(family)
    with torch.no_grad():
        got = model(input_ids=gold["ids"]).logits
    assert got.shape == gold["logits"].shape
    assert torch.allclose(got, gold["logits"], atol=1e-5, rtol=0)
    assert not torch.allclose(got, gold["logits"] + 1e-3, atol=1e-5, rtol=0)  # the check can fail


@pytest.mark.parametrize("family", ["llada", "dream"])
def test_one_gradient_equals_the_original_code(family):
    model, gold = _native(family)
    (model(input_ids=gold["ids"]).logits * gold["weights"]).sum().backward()
    params = dict(model.named_parameters())
    for name, ref in gold["grads"].items():
        assert torch.allclose(params[name].grad, ref, atol=1e-5, rtol=1e-4), name


def test_llada_without_a_mask_is_d1s_padding_behaviour():
    """d1 passes no usable mask: the original attends to the pads. The native class given no mask does the same."""
    model, gold = _native("llada")
    with torch.no_grad():
        got = model(input_ids=gold["padded"]).logits
    assert torch.allclose(got, gold["padded_logits"], atol=1e-5, rtol=0)


@pytest.mark.parametrize("family", ["llada", "dream"])
def test_masked_padding_leaves_a_row_as_if_unpadded(family):
    """With the mask and positions from the first real token (what the adapter passes), a left-padded
    row's real positions equal the original's logits for that row unpadded; LLaDA's original cannot do this."""
    model, gold = _native(family)
    mask = gold["mask"]
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    pads = int((mask[1] == 0).sum())
    with torch.no_grad():
        got = model(input_ids=gold["padded"], attention_mask=mask, position_ids=pos).logits
    assert torch.allclose(got[1, pads:], gold["logits"][1], atol=1e-5, rtol=0)
    if family == "dream":  # the original's own (B, 1, L, L) masked run: every real row
        assert torch.allclose(got[0], gold["padded_logits"][0], atol=1e-5, rtol=0)
        assert torch.allclose(got[1, pads:], gold["padded_logits"][1, pads:], atol=1e-5, rtol=0)
        square = mask.bool()[:, None, None, :].expand(-1, 1, mask.shape[1], -1)
        with torch.no_grad():
            again = model(input_ids=gold["padded"], attention_mask=square, position_ids=pos).logits
        assert torch.allclose(again, got, atol=1e-6)
    else:
        assert not torch.allclose(gold["padded_logits"][1, pads:], gold["logits"][1], atol=1e-3)


@pytest.mark.parametrize("family", ["llada", "dream"])
def test_checkpointing_through_the_standard_api_keeps_the_gradients(family):
    model, gold = _native(family)
    model.train()
    grads = []
    for ckpt in (False, True):
        model.zero_grad()
        if ckpt:
            if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.2x
                model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
            else:  # earlier 5.x (the H200 image has 5.17) and 4.x
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        (model(input_ids=gold["ids"]).logits * gold["weights"]).sum().backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
    assert getattr(model, "is_activation_checkpointing", None) or model.is_gradient_checkpointing
    assert torch.allclose(grads[0], grads[1], atol=1e-6)


@pytest.mark.parametrize("family", ["llada", "dream"])
def test_bf16_stays_close_and_save_load_is_exact(family, tmp_path):
    model, gold = _native(family)
    half = CLASSES[family][1](model.config).to(torch.bfloat16).eval()
    half.load_state_dict({k: v.bfloat16() for k, v in gold["state"].items()})
    with torch.no_grad():
        low = half(input_ids=gold["ids"]).logits.float()
    assert low.dtype == torch.float32 and torch.isfinite(low).all()
    assert (low - gold["logits"]).abs().max() < 0.1
    model.save_pretrained(tmp_path)
    again = CLASSES[family][1].from_pretrained(tmp_path).eval()
    with torch.no_grad():
        assert torch.equal(again(input_ids=gold["ids"]).logits, model(input_ids=gold["ids"]).logits)
