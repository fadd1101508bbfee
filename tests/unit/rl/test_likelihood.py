import pytest
import torch

from daca_bench.rl.likelihood import elbo_logprobs, sml_logprobs
from daca_bench.rl.sampler import pad_prompts
from daca_bench.rl.strata import assign_strata, mask_prompts

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
    logp = torch.log_softmax(tiny.logits(ids, attn)[:, p.shape[1] :], -1)
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
        want = torch.stack(
            [_direct(tiny, p, m, comp, torch.arange(L)[None].expand(3, -1) == k)[:, k] for k in range(L)], 1
        )
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


# ---- causal: the decode-order likelihood --------------------------------------------------------
@pytest.fixture(scope="module")
def rollout(tiny):
    from daca_bench.config import SamplerConfig
    from daca_bench.rl.sampler import sample

    cfg = SamplerConfig(gen_length=8, block_length=4, steps=6, temperature=0.9)
    return sample(tiny, ["12+5=", "3-1+20=", "7=", "40-2="], cfg, seed=3)


def test_causal_with_one_stratum_per_step_is_the_recorded_commit_logp(tiny, rollout):
    traj = rollout.trajectory
    T = int(traj.commit_step.max())
    with torch.no_grad():
        got = sml_logprobs(
            tiny,
            rollout.prompt_ids,
            rollout.prompt_mask,
            rollout.completion_ids,
            k=T,
            partition="causal",
            commit_step=traj.commit_step,
        )
    assert torch.allclose(got, traj.commit_logp, atol=1e-5), (got - traj.commit_logp).abs().max()


def test_causal_strata_merge_consecutive_steps():
    commit = torch.tensor([[1, 1, 2, 2, 3, 3, 4, 4]])
    assert assign_strata(1, 8, 4, "causal", [0], 0, commit_step=commit).tolist() == [[0, 0, 1, 1, 2, 2, 3, 3]]
    assert assign_strata(1, 8, 2, "causal", [0], 0, commit_step=commit).tolist() == [[0, 0, 0, 0, 1, 1, 1, 1]]


@pytest.mark.parametrize("k", [2, 6])
def test_causal_pass_hides_the_stratum_and_everything_committed_later(tiny, rollout, k):
    p, m, comp, step = rollout.prompt_ids, rollout.prompt_mask, rollout.completion_ids, rollout.trajectory.commit_step
    strata = assign_strata(len(comp), comp.shape[1], k, "causal", range(len(comp)), 0, commit_step=step)
    with torch.no_grad():
        got = sml_logprobs(tiny, p, m, comp, k=k, partition="causal", commit_step=step, seq_ids=range(len(comp)))
        want = torch.zeros_like(got)
        for j in range(k):
            want = torch.where(strata == j, _direct(tiny, p, m, comp, strata >= j), want)
    assert torch.allclose(got, want, atol=1e-5)


def test_causal_gradient_matches_autograd_through_plain_log_softmax(tiny, rollout):
    """The chunked custom backward of the estimator against autograd through a plain log_softmax."""
    p, m, comp, step = rollout.prompt_ids, rollout.prompt_mask, rollout.completion_ids, rollout.trajectory.commit_step
    T = int(step.max())
    params = [q for q in tiny.model.parameters() if q.requires_grad]
    adv = torch.linspace(-1, 1, len(comp))[:, None]

    def grads(value):
        for q in params:
            q.grad = None
        (value * adv).sum().backward()
        return torch.cat([q.grad.flatten() for q in params])

    g_est = grads(sml_logprobs(tiny, p, m, comp, k=T, partition="causal", commit_step=step))
    ref = torch.zeros(comp.shape)
    for t in range(1, T + 1):
        ref = torch.where(step == t, _direct(tiny, p, m, comp, step >= t), ref)
    g_ref = grads(ref)
    for q in params:
        q.grad = None
    assert torch.allclose(g_est, g_ref, atol=1e-5, rtol=1e-4)


def test_causal_with_k_above_the_steps_warns_and_builds_no_empty_stratum(tiny, data):
    p, m, comp = data
    commit = torch.tensor([[1, 1, 1, 2, 2, 2]] * 3)  # two denoising steps
    with pytest.warns(UserWarning, match="using k=2"):
        s = assign_strata(3, 6, 4, "causal", [0, 1, 2], 0, commit_step=commit)
    assert s.unique().tolist() == [0, 1]
    calls = []
    handle = tiny.model.register_forward_pre_hook(
        lambda mod, args, kw: calls.append(args[0].shape[0] if args else kw["input_ids"].shape[0]), with_kwargs=True
    )
    try:
        with pytest.warns(UserWarning):
            clamped = sml_logprobs(tiny, p, m, comp, k=4, partition="causal", commit_step=commit)
    finally:
        handle.remove()
    assert sum(calls) == 2 * 3  # two passes of three rows: no duplicate pass for an empty stratum
    exact = sml_logprobs(tiny, p, m, comp, k=2, partition="causal", commit_step=commit)
    assert torch.equal(clamped, exact)


def test_a_micro_batch_clamps_causal_k_as_its_whole_step_does():
    """A micro-batch (or one process's rows) holds rows with more steps than the step's fewest: given the step's
    `fewest_steps`, its strata are the whole batch's rows; on its own it would clamp K to its own fewest."""
    from daca_bench.rl.strata import agreed_levels, fewest_steps

    commit = torch.tensor([[1, 1, 2, 2, 2, 2], [1, 2, 3, 3, 3, 3], [1, 2, 3, 4, 4, 4]])  # 2, 3 and 4 steps
    with pytest.warns(UserWarning, match="using k=2"):
        whole = assign_strata(3, 6, 4, "causal", [0, 1, 2], 0, commit_step=commit)
    fewest = fewest_steps(commit)
    assert fewest.tolist() == [2]
    with pytest.warns(UserWarning, match="using k=2"):
        part = assign_strata(2, 6, 4, "causal", [1, 2], 0, commit_step=commit[1:], fewest=fewest)
    assert torch.equal(part, whole[1:])
    with pytest.warns(UserWarning, match="using k=3"):  # the micro-batch's own fewest: other strata
        assert not torch.equal(assign_strata(2, 6, 4, "causal", [1, 2], 0, commit_step=commit[1:]), whole[1:])
    assert agreed_levels(whole[2:], 4).tolist() == [0, 1]
    # a block model: the fewest steps of each block, counted from the block's first
    assert fewest_steps(torch.tensor([[1, 2, 3, 4], [1, 1, 3, 4]]), block=2).tolist() == [1, 2]
