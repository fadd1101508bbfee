"""Issue 47, rollouts at the speed of the hardware: the output layer run only on the positions a pass
reads (`logits_to_keep`), the KV cache written in place, the prepared mask, and the sampler's pass
loop (per-row draws into reused buffers, no read-back to the host, the record from one pass over the
vocabulary) give what the code before them gave. tests/unit/rl/test_cache.py holds the golden rollouts."""

import pytest
import torch

from daca_bench.archs.common import KVCache
from daca_bench.config import SamplerConfig
from daca_bench.rl.sampler import pad_prompts, sample

PROMPTS = ["12+5=", "3-1+20=", "7=", "30-29-1="]  # different lengths: left padding
FAMILIES = ["tiny", "llada", "dream"]


@pytest.fixture(scope="module")
def adapters(tiny):
    from daca_bench.testing.paper import paper_adapter

    out = {"tiny": tiny}
    for family in ("llada", "dream"):
        out[family] = paper_adapter(family, compact=True)
        out[family].model.eval()
    return out


class ConcatCache(KVCache):
    """The cache as it was before issue 47: a window pass attends to the stored keys with its rows
    replaced by a concatenation, and leaves the store as it was."""

    def update(self, k, v, layer, *_, **__):
        if self.window is None:
            return super().update(k, v, layer)
        lo, hi = self.window
        K, V = self.keys[layer], self.values[layer]
        return torch.cat([K[:, :, :lo], k, K[:, :, hi:]], dim=2), torch.cat([V[:, :, :lo], v, V[:, :, hi:]], dim=2)


def _canvas(adapter, L=12):
    ids, mask = pad_prompts(adapter, PROMPTS)
    x = torch.cat([ids, torch.full((len(ids), L), adapter.mask_token_id)], dim=1)
    return x, torch.cat([mask, torch.ones((len(ids), L), dtype=torch.long)], dim=1), ids.shape[1]


@pytest.mark.parametrize("family", FAMILIES)
def test_the_head_on_the_kept_positions_gives_the_full_pass_s_logits_there(adapters, family):
    adapter = adapters[family]
    x, attn, p = _canvas(adapter)
    S = x.shape[1]
    prepared = adapter.canvas_mask(attn, padded=True)
    with torch.no_grad():
        full = adapter.logits(x, attn)  # (N, S, V): every row through the head, as before
        for a, b in ((p, S), (p + 4, p + 8), (0, 3), (S - 1, S)):
            for mask in (attn, prepared):
                got = adapter.logits(x, mask, keep=(a, b))
                assert got.shape == (len(x), b - a, full.shape[-1])
                torch.testing.assert_close(got, full[:, a:b], rtol=0, atol=1e-5, msg=(family, a, b))
        same = x[:1].clone()  # one row, nothing padded: the prepared mask calls the model without one
        want = adapter.logits(same, torch.ones_like(same))[:, p:]
        got = adapter.logits(same, adapter.canvas_mask(torch.ones_like(same), padded=False), keep=(p, S))
        torch.testing.assert_close(got, want, rtol=0, atol=1e-5)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("kind", ["prefix", "dual"])
def test_the_in_place_cache_and_the_kept_head_give_the_logits_read_before(adapters, family, kind):
    """A block decoded as the sampler does it (a full pass, then the same window each step while its
    tokens are committed): the in-place cache with the head on the kept rows equals the concatenating
    cache with the head on every row, at the positions each step reads."""
    adapter = adapters[family]
    x, attn, p = _canvas(adapter)
    S, b = x.shape[1], 4
    old, new = ConcatCache(), KVCache()
    prepared = adapter.canvas_mask(attn, padded=True)
    fill = adapter.encode(["8"])[0][0]
    with torch.no_grad():
        for lo in (0, 4, 8):  # three blocks
            hi = lo + b
            want = adapter.forward_cached(x, attn, old)[:, p + lo :]
            got = adapter.forward_cached(x, prepared, new, keep=(p + lo, S))
            torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
            for step in range(3):
                x[:, p + lo + step] = fill  # a commit inside the block
                end = S if kind == "prefix" else p + hi
                want = adapter.forward_cached(x, attn, old, window=(p + lo, end))
                for keep in ((p + lo, end), (p + lo, p + hi)):
                    got = adapter.forward_cached(x, prepared, new, window=(p + lo, end), keep=keep)
                    torch.testing.assert_close(
                        got,
                        want[:, keep[0] - p - lo : keep[1] - p - lo],
                        rtol=0,
                        atol=1e-5,
                        msg=(family, kind, lo, step, keep),
                    )


def test_a_model_that_cannot_take_logits_to_keep_is_sliced_after(tiny):
    from daca_bench.adapter import ModelAdapter

    class Plain(torch.nn.Module):  # no logits_to_keep, as the published LLaDA code
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask=None):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask)

    class Suffix(Plain):  # the published Dream code's int-only argument
        def forward(self, input_ids, attention_mask=None, num_logits_to_keep: int = 0):
            self.asked = num_logits_to_keep
            return type("Out", (), {"logits": self.inner(input_ids=input_ids).logits[:, -num_logits_to_keep:]})()

    ids = torch.tensor([tiny.encode(["12+5=??"])[0]])
    with torch.no_grad():
        want = tiny.logits(ids)[:, 2:5]
        for cls in (Plain, Suffix):
            other = ModelAdapter(
                cls(tiny.model), tiny.tokenizer, tiny.mask_token_id, tiny.eos_token_id, tiny.pad_token_id
            )
            torch.testing.assert_close(other.logits(ids, keep=(2, 5)), want, rtol=0, atol=1e-6)
        assert other.model.asked == ids.shape[1] - 2


@pytest.mark.parametrize("family", ["tiny", "llada"])
@pytest.mark.parametrize("cache", ["none", "prefix", "dual"])
def test_a_row_decodes_the_same_whatever_rows_share_its_batch(adapters, family, cache):
    """The trainer keys each row's seed by its global prompt index and splits a step's rows over
    processes: a row's tokens, steps and record must not depend on its batch, its place or its chunk."""
    adapter = adapters[family]
    seeds = [101, 202, 303, 404]
    cfg = SamplerConfig(gen_length=8, block_length=4, steps=8, temperature=0.9, cache=cache)
    whole = sample(adapter, PROMPTS, cfg, seed=seeds)
    parts = [
        ([2, 3], cfg),
        ([3, 0], cfg),
        ([1], cfg),
        ([0, 1, 2, 3], SamplerConfig(**{**cfg.__dict__, "batch_size": 1})),
    ]
    for rows, c in parts:
        got = sample(adapter, [PROMPTS[r] for r in rows], c, seed=[seeds[r] for r in rows])
        assert torch.equal(got.completion_ids, whole.completion_ids[rows]), (family, cache, rows)
        assert torch.equal(got.trajectory.commit_step, whole.trajectory.commit_step[rows])
        torch.testing.assert_close(got.trajectory.commit_logp, whole.trajectory.commit_logp[rows], rtol=0, atol=1e-4)
    other = sample(adapter, PROMPTS, cfg, seed=[101, 202, 303, 405])  # another seed moves only its row
    assert torch.equal(other.completion_ids[:3], whole.completion_ids[:3])
    assert not torch.equal(other.completion_ids[3], whole.completion_ids[3])


def _read_backs(monkeypatch, run) -> int:
    """How many times `run` reads a tensor's value back to the host (what syncs a GPU)."""
    count = [0]
    for name in ("__bool__", "item", "tolist", "__int__", "__float__", "nonzero", "cpu"):
        orig = getattr(torch.Tensor, name)

        def counted(self, *a, _orig=orig, **k):
            count[0] += 1
            return _orig(self, *a, **k)

        monkeypatch.setattr(torch.Tensor, name, counted)
    run()
    monkeypatch.undo()
    return count[0]


@pytest.mark.parametrize(
    "family,cache",
    [
        ("llada", "none"),
        ("llada", "prefix"),
        ("llada", "dual"),
        ("dream", "dual"),
        ("tiny", "prefix"),
        ("tiny", "dual"),
    ],
)
def test_the_pass_loop_reads_nothing_back_to_the_host(adapters, monkeypatch, family, cache):
    """Twice the steps (twice the passes, the same blocks) reads back no more: none per pass. With a
    threshold, one per pass (whether the block is done)."""
    adapter = adapters[family]

    def run(steps, threshold=None):
        cfg = SamplerConfig(
            gen_length=8, block_length=4, steps=steps, temperature=0.9, cache=cache, threshold=threshold
        )
        return _read_backs(monkeypatch, lambda: sample(adapter, PROMPTS, cfg, seed=[1, 2, 3, 4]))

    assert run(4) == run(8)
    passes = sample(
        adapter,
        PROMPTS,
        SamplerConfig(gen_length=8, block_length=4, steps=8, temperature=0.9, cache=cache, threshold=0.5),
        seed=[1, 2, 3, 4],
    ).forward_passes
    assert run(8, threshold=0.5) == run(4) + passes


def test_the_ledger_books_the_tiny_model_s_cached_passes(tiny):
    """The BERT cached pass goes through the model's parts: the ledger's hooks (with kwargs) still see it,
    and a pass whose head runs on fewer rows is booked fewer FLOPs."""
    from daca_bench.rl.ledger import Ledger

    model = tiny.model
    ledger = Ledger(model)
    try:
        with ledger("rollout"):
            batch = sample(tiny, PROMPTS, SamplerConfig(gen_length=8, block_length=4, steps=8, cache="prefix"), seed=0)
        with ledger("full"):
            x, attn, p = _canvas(tiny, 8)
            with torch.no_grad():
                tiny.logits(x, attn)
        with ledger("kept"):
            with torch.no_grad():
                tiny.forward_cached(x, attn, KVCache(), keep=(p, x.shape[1] - 4))
    finally:
        model._forward_pre_hooks.clear()
        model._forward_hooks.clear()
    book = ledger.totals()
    assert book["rollout"]["calls"] == batch.forward_passes and book["rollout"]["flops_forward"] > 0
    assert 0 < book["kept"]["flops_forward"] < book["full"]["flops_forward"]
