import pytest
import torch

from daca_bench.config import SamplerConfig
from daca_bench.rl.sampler import (
    replay_commit_logp,
    sample,
    transfer_schedule,
    valid_mask,
)

PROMPTS = ["12+5=", "3-1+20=", "7=", "30-29-1="]


def test_same_seed_same_output(tiny):
    cfg = SamplerConfig(gen_length=8, block_length=4, steps=8, temperature=0.9)
    a, b = sample(tiny, PROMPTS, cfg, seed=3), sample(tiny, PROMPTS, cfg, seed=3)
    assert torch.equal(a.completion_ids, b.completion_ids)
    assert torch.equal(a.trajectory.commit_step, b.trajectory.commit_step)
    c = sample(tiny, PROMPTS, cfg, seed=4)
    assert not torch.equal(a.completion_ids, c.completion_ids)


def test_one_token_per_step_when_block_and_steps_equal_length(tiny):
    L = 8
    batch = sample(tiny, PROMPTS, SamplerConfig(gen_length=L, block_length=L, steps=L, temperature=0.7), seed=0)
    for row in batch.trajectory.commit_step:
        assert sorted(row.tolist()) == list(range(1, L + 1))
    assert batch.forward_passes == L


@pytest.mark.parametrize("remasking", ["low_confidence", "random"])
def test_replay_reproduces_commit_logp(tiny, remasking):
    cfg = SamplerConfig(gen_length=8, block_length=4, steps=4, temperature=1.0, remasking=remasking)
    batch = sample(tiny, PROMPTS, cfg, seed=1)
    replayed = replay_commit_logp(tiny, batch)
    assert torch.allclose(replayed, batch.trajectory.commit_logp, atol=1e-5)


def test_conf_record_is_finite_exactly_while_masked(tiny):
    cfg = SamplerConfig(gen_length=8, block_length=4, steps=8)
    traj = sample(tiny, PROMPTS, cfg, seed=0).trajectory
    T = traj.conf.shape[1]
    steps = torch.arange(1, T + 1)[None, :, None]  # (1, T, 1)
    still_masked = traj.commit_step[:, None, :] >= steps  # masked before step t
    assert torch.equal(~torch.isnan(traj.conf), still_masked)
    finite = traj.conf[still_masked]
    assert (finite > 0).all() and (finite <= 1).all()
    assert (traj.commit_logp <= 0).all()


def test_blocks_are_decoded_left_to_right(tiny):
    traj = sample(tiny, PROMPTS, SamplerConfig(gen_length=8, block_length=4, steps=8), seed=0).trajectory
    assert (traj.commit_step[:, :4].max(1).values < traj.commit_step[:, 4:].min(1).values).all()


def test_left_padding_does_not_change_a_prompt_completion(tiny):
    cfg = SamplerConfig(gen_length=8, block_length=8, steps=8)
    together = sample(tiny, PROMPTS, cfg, seed=0)
    for i, p in enumerate(PROMPTS):
        alone = sample(tiny, [p], cfg, seed=0)
        assert alone.texts[0] == together.texts[i]
        assert torch.allclose(alone.trajectory.commit_logp[0], together.trajectory.commit_logp[i], atol=1e-4)


def test_record_off_gives_same_completions(tiny):
    cfg = SamplerConfig(gen_length=8, block_length=4, steps=8, temperature=0.5)
    on, off = sample(tiny, PROMPTS, cfg, seed=2), sample(tiny, PROMPTS, cfg, seed=2, record=False)
    assert torch.equal(on.completion_ids, off.completion_ids) and off.trajectory is None


def test_threshold_decoding_fills_the_canvas_in_fewer_passes(tiny):
    greedy = SamplerConfig(gen_length=8, block_length=8, steps=8)
    fast = SamplerConfig(gen_length=8, block_length=8, steps=8, threshold=0.0)
    batch = sample(tiny, PROMPTS, fast, seed=0)
    assert batch.forward_passes == 1 and (batch.completion_ids != tiny.mask_token_id).all()
    strict = sample(tiny, PROMPTS, SamplerConfig(gen_length=8, block_length=8, steps=8, threshold=1.01), seed=0)
    assert strict.forward_passes == 8  # nothing passes the threshold: one token per step
    assert torch.equal(strict.completion_ids, sample(tiny, PROMPTS, greedy, seed=0).completion_ids)


def test_never_commits_mask_or_pad(tiny):
    batch = sample(tiny, PROMPTS * 4, SamplerConfig(temperature=2.0), seed=5)
    assert not torch.isin(batch.completion_ids, torch.tensor([tiny.mask_token_id, tiny.pad_token_id])).any()


def test_valid_mask_stops_after_first_eos():
    eos = 2
    ids = torch.tensor([[5, 2, 7, 2], [5, 6, 7, 8]])
    assert valid_mask(ids, eos).tolist() == [[True, True, False, False], [True] * 4]


def test_transfer_schedule_sums_to_block():
    sched = transfer_schedule(torch.tensor([8, 5, 0]), 3)
    assert sched.sum(1).tolist() == [8, 5, 0] and sched[0].tolist() == [3, 3, 2]


def test_bad_geometry_is_a_clear_error(tiny):
    with pytest.raises(ValueError, match="multiple of sampler.block_length"):
        sample(tiny, PROMPTS, SamplerConfig(gen_length=8, block_length=3, steps=8))
    with pytest.raises(ValueError, match="multiple of the number of blocks"):
        sample(tiny, PROMPTS, SamplerConfig(gen_length=8, block_length=2, steps=6))


def test_decode_stops_at_eos_and_drops_undecodable_ids(tiny):
    ids = tiny.encode(["42"])[0] + [tiny.eos_token_id] + tiny.encode(["x"])[0]
    assert tiny.decode(ids) == "42"
    assert tiny.decode(tiny.encode(["4"])[0] + [10**6]) == "4"


def test_per_row_seeds_make_rows_independent_of_the_batch(tiny):
    cfg = SamplerConfig(gen_length=8, block_length=4, steps=8, temperature=1.0, remasking="random")
    both = sample(tiny, PROMPTS, cfg, seed=[10, 11, 12, 13])
    half = sample(tiny, PROMPTS[2:], cfg, seed=[12, 13])
    assert both.texts[2:] == half.texts
    assert torch.equal(both.trajectory.commit_step[2:], half.trajectory.commit_step)
