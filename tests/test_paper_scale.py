"""Paper scale on CPU: chunked log-probs against the float32 reference, activation-memory knobs,
the LLaDA-shaped remote-code model end to end, d1's loss aggregation and optimiser knobs."""
import pytest
import torch

from daca_bench.rl.likelihood import logsumexp_max, sml_logprobs, target_logprobs
from daca_bench.rl.sampler import pad_prompts


def _reference(logits, target):
    return torch.log_softmax(logits.float(), -1).gather(-1, target[..., None]).squeeze(-1)


@pytest.mark.parametrize("chunk", [1, 3, 7, 16, 0])
def test_chunked_target_logprobs_match_the_float32_log_softmax(chunk):
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(5, 7, 300, generator=gen) * 4
    target = torch.randint(0, 300, (5, 7), generator=gen)
    assert torch.allclose(target_logprobs(logits, target, chunk), _reference(logits, target), atol=1e-5)
    lse, top = logsumexp_max(logits, chunk)
    assert torch.allclose(lse, torch.logsumexp(logits, -1), atol=1e-5)
    assert torch.equal(top, logits.amax(-1))


def test_chunked_gradients_equal_the_reference_and_bf16_stays_close():
    gen = torch.Generator().manual_seed(1)
    base = torch.randn(4, 6, 200, generator=gen) * 3
    target = torch.randint(0, 200, (4, 6), generator=gen)
    a, b = base.clone().requires_grad_(), base.clone().requires_grad_()
    target_logprobs(a, target, 5).sum().backward()
    _reference(b, target).sum().backward()
    assert torch.allclose(a.grad, b.grad, atol=1e-6)
    half = target_logprobs(base.bfloat16(), target, 5)
    assert half.dtype == torch.float32
    assert torch.allclose(half, _reference(base, target), atol=0.1)  # bf16 rounding of the logits only
    assert not torch.allclose(half, _reference(base, target) + 0.5, atol=0.1)


def test_sml_on_the_tiny_model_is_unchanged_by_the_logit_chunk(tiny):
    p, m = pad_prompts(tiny, ["12+5=", "3-1+20=", "7="])
    comp = torch.randint(4, 60, (3, 6), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        whole = sml_logprobs(tiny, p, m, comp, k=2, logit_chunk=0)
        for c in (1, 5, 1024):
            assert torch.allclose(sml_logprobs(tiny, p, m, comp, k=2, logit_chunk=c), whole, atol=1e-5)


def test_rows_that_fit_grow_with_free_memory_and_checkpointing():
    from daca_bench.rl.memory import rows_that_fit

    llada = dict(seq_len=456, vocab=126_464, hidden=4096, layers=32, dtype_bytes=2)
    plain = rows_that_fit(80 * 2**30, checkpointing=False, **llada)
    ckpt = rows_that_fit(80 * 2**30, checkpointing=True, **llada)
    assert 1 <= plain < ckpt
    assert rows_that_fit(160 * 2**30, checkpointing=True, **llada) >= 2 * ckpt - 1
    assert rows_that_fit(1, checkpointing=True, **llada) == 1


def test_sml_chunk_is_unchanged_on_cpu(tiny):
    from daca_bench.config import RLConfig, apply
    from daca_bench.rl.memory import sml_chunk

    assert sml_chunk(tiny, RLConfig(), 40) is None
    assert sml_chunk(tiny, apply(RLConfig(), {"sml.chunk": 6}), 40) == 6


def test_out_of_memory_in_a_step_is_one_line_naming_the_knobs(tmp_path, monkeypatch):
    from daca_bench.config import ConfigError, RLConfig, apply
    from daca_bench.rl import trainer

    def boom(*a, **k):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB\nmore detail")

    monkeypatch.setattr(trainer, "train_step", boom)
    cfg = apply(RLConfig(), {"train": {"task": "even_length", "steps": 1, "n_eval": 4, "threads": 1,
                                       "gradient_checkpointing": True}})
    with pytest.raises(ConfigError) as err:
        trainer.train(cfg, tmp_path, progress=False)
    msg = str(err.value)
    assert "\n" not in msg and "20.00 GiB" in msg
    assert all(k in msg for k in ("sml.chunk", "train.grad_accum", "train.gradient_checkpointing"))


def test_gradient_checkpointing_gives_the_same_gradients(tiny):
    import copy

    from daca_bench.rl.memory import enable_gradient_checkpointing

    p, m = pad_prompts(tiny, ["12+5=", "7="])
    comp = torch.randint(4, 60, (2, 6), generator=torch.Generator().manual_seed(3))
    grads = []
    for ckpt in (False, True):
        model = copy.deepcopy(tiny.model).train()
        if ckpt:
            enable_gradient_checkpointing(model)
        adapter = type(tiny)(model, tiny.tokenizer, tiny.mask_token_id, tiny.eos_token_id, tiny.pad_token_id)
        sml_logprobs(adapter, p, m, comp, k=2).sum().backward()
        grads.append(torch.cat([q.grad.flatten() for q in model.parameters() if q.grad is not None]))
    assert model.is_gradient_checkpointing
    assert torch.allclose(grads[0], grads[1], atol=1e-5)
