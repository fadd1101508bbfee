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
