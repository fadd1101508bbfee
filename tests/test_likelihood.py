import pytest
import torch

from daca_bench.rl.likelihood import (
    assign_strata,
    elbo_logprobs,
    mask_prompts,
    sml_logprobs,
)
from daca_bench.rl.sampler import pad_prompts

PROMPTS = ["12+5=", "3-1+20=", "7="]


@pytest.fixture(scope="module")
def data(tiny):
    p, m = pad_prompts(tiny, PROMPTS)
    comp = torch.full((3, 6), tiny.eos_token_id)
    for i, ans in enumerate(["17", "22", "7"]):
        ids = tiny.encode([ans])[0]
        comp[i, : len(ids)] = torch.tensor(ids)
    return p, m, comp


def _direct(tiny, p, m, comp, hide):
    """log p(o_k | canvas with `hide` masked) by a plain forward pass: (N, L)."""
    canvas = torch.where(hide, torch.full_like(comp, tiny.mask_token_id), comp)
    ids = torch.cat([p, canvas], 1)
    attn = torch.cat([m, torch.ones_like(comp)], 1)
    logp = torch.log_softmax(tiny.logits(ids, attn)[:, p.shape[1]:], -1)
    return logp.gather(-1, comp[..., None]).squeeze(-1)


def test_k1_is_the_fully_masked_mean_field_pass(tiny, data):
    p, m, comp = data
    with torch.no_grad():
        got = sml_logprobs(tiny, p, m, comp, k=1)
        assert torch.allclose(got, _direct(tiny, p, m, comp, torch.ones_like(comp, dtype=torch.bool)), atol=1e-5)


def test_k_equals_l_is_the_pseudo_likelihood(tiny, data):
    p, m, comp = data
    L = comp.shape[1]
    with torch.no_grad():
        got = sml_logprobs(tiny, p, m, comp, k=L, partition="strided")
        want = torch.stack([_direct(tiny, p, m, comp, torch.arange(L)[None].expand(3, -1) == k)[:, k] for k in range(L)], 1)
    assert torch.allclose(got, want, atol=1e-5)


@pytest.mark.parametrize("partition", ["random", "strided", "commit_order"])
@pytest.mark.parametrize("k", [1, 2, 3, 4, 8])
def test_strata_form_a_balanced_partition(partition, k):
    commit = torch.stack([torch.randperm(8) + 1 for _ in range(5)])
    s = assign_strata(5, 8, k, partition, seq_ids=range(5), inner=0, commit_step=commit)
    for row in s:
        counts = torch.bincount(row, minlength=k)
        assert counts.sum() == 8 and counts.max() - counts.min() <= 1 and row.min() >= 0 and row.max() < k


def test_same_key_same_masks_and_new_inner_new_masks():
    a = assign_strata(4, 16, 4, "random", seq_ids=["a", "b", "c", "d"], inner=0, seed=1)
    b = assign_strata(4, 16, 4, "random", seq_ids=["a", "b", "c", "d"], inner=0, seed=1)
    c = assign_strata(4, 16, 4, "random", seq_ids=["a", "b", "c", "d"], inner=1, seed=1)
    assert torch.equal(a, b) and not torch.equal(a, c)
    # a sequence's masks do not depend on its batch-mates
    assert torch.equal(assign_strata(1, 16, 4, "random", seq_ids=["c"], inner=0, seed=1)[0], a[2])


def test_current_old_reference_see_the_same_masks(tiny, data):
    """Same key -> same canvases: two identical models give identical log-probs, prompt masking included."""
    p, m, comp = data
    with torch.no_grad():
        kw = dict(k=2, seq_ids=[5, 6, 7], inner=3, p_mask_prompt=0.5)
        assert torch.equal(sml_logprobs(tiny, p, m, comp, **kw), sml_logprobs(tiny, p, m, comp, **kw))


def test_prompt_masking_never_touches_padding(tiny):
    p, m = pad_prompts(tiny, ["1=", "123456789="])
    masked = mask_prompts(p, m, 1.0, tiny.mask_token_id, [0, 1], 0)
    assert ((masked == tiny.mask_token_id) == m.bool()).all()


def test_chunked_equals_batched(tiny, data):
    p, m, comp = data
    with torch.no_grad():
        a = sml_logprobs(tiny, p, m, comp, k=3, seq_ids=[1, 2, 3])
        b = sml_logprobs(tiny, p, m, comp, k=3, seq_ids=[1, 2, 3], chunk=2)
    assert torch.allclose(a, b, atol=1e-5)


def test_elbo_is_a_weighted_average_of_masked_log_probs(tiny, data):
    p, m, comp = data
    with torch.no_grad():
        one = elbo_logprobs(tiny, p, m, comp, draws=1, seq_ids=[0, 1, 2])
    assert (one <= 0).all() and (one < 0).any()
