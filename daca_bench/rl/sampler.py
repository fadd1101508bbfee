"""LLaDA-style sampler that also returns the trajectory record (docs/method.md, section 3),
at no extra forward pass.

Block semi-autoregressive decoding: the completion canvas (L masks) is split into blocks of
b; each block gets T / (L / b) steps; at each step the model predicts every masked position
and the sampler commits the most confident ones in the current block (`low_confidence`) or
random ones (`random`). Temperature acts through Gumbel noise in float64. With
`threshold` set it decodes in parallel instead (Fast-dLLM): every masked position of the
block whose confidence exceeds the threshold is committed (at least one per step).
`cache` = prefix | dual reuses keys and values within a block (Fast-dLLM; `cache.step_logits`,
docs/method.md section 3.1): the record stays complete, its numbers come from the cached passes.
A block-diffusion model (model.block_size) decodes its own blocks, each pass over its open block only
(`archs.block.block_step`; `cache` = block: the exact cache of its finished blocks, section 12).

    batch = sample(adapter, ["12+5="], SamplerConfig(gen_length=8, steps=8), seed=0)
    batch.texts, batch.trajectory.commit_step, batch.trajectory.conf   # (N, L), (N, T, L)

`commit_logp`, `conf` and `commit_entropy` are read from the model's own (untempered) distribution, the
quantity every likelihood estimator in `likelihood.py` also targets; logsumexp and max over
the vocabulary are taken in chunks (`likelihood.logsumexp_max`), never on a float32 copy
of the whole (N, L, V) logits.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import torch

from ..adapter import ModelAdapter
from ..archs.block import block_step
from ..archs.common import KVCache
from ..config import ConfigError, SamplerConfig, pick
from .cache import CACHES, step_logits
from .likelihood import LOGIT_CHUNK, _chunks, logsumexp_max


@dataclass
class Trajectory:
    commit_step: torch.Tensor  # (N, L) int64: tau_k in 1..T
    commit_logp: torch.Tensor  # (N, L) float32: log p^{tau_k}_k(o_k)
    conf: torch.Tensor  # (N, T, L) float32: max_v p^t_k(v) for k masked before step t, NaN otherwise
    commit_entropy: torch.Tensor | None = None  # (N, L) float32: entropy (nats) of p^{tau_k}_k (collapse guards)
    block: torch.Tensor | None = None  # (N, L) int64: the decoding block of each position (dps.scope=block)


@dataclass
class RolloutBatch:
    prompt_ids: torch.Tensor  # (N, P) left-padded
    prompt_mask: torch.Tensor  # (N, P) 1 = real prompt token
    completion_ids: torch.Tensor  # (N, L)
    completion_mask: torch.Tensor  # (N, L) bool: valid tokens, up to and including the first EOS
    texts: list[str]
    trajectory: Trajectory | None
    forward_passes: int
    commit_step: torch.Tensor | None = None  # (N, L) 1-based step of each commit, kept even with record=False

    @property
    def input_ids(self) -> torch.Tensor:  # (N, P+L)
        return torch.cat([self.prompt_ids, self.completion_ids], dim=1)

    @property
    def attention_mask(self) -> torch.Tensor:  # (N, P+L)
        return torch.cat([self.prompt_mask, torch.ones_like(self.completion_ids)], dim=1)


def pad_prompts(adapter: ModelAdapter, prompts) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad prompts (strings or id lists) to one length: (N, P) ids and attention mask."""
    ids = adapter.encode(prompts) if prompts and isinstance(prompts[0], str) else [list(p) for p in prompts]
    width = max(len(p) for p in ids)
    out = torch.full((len(ids), width), adapter.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for i, p in enumerate(ids):
        if p:
            out[i, width - len(p) :] = torch.tensor(p)
            mask[i, width - len(p) :] = 1
    return out, mask


def transfer_schedule(masked_count: torch.Tensor, steps: int) -> torch.Tensor:
    """(N,) masked positions in a block -> (N, steps) tokens to commit at each step (LLaDA's split)."""
    base = masked_count // steps
    rem = masked_count % steps
    sched = base[:, None].expand(-1, steps).clone()
    sched += (torch.arange(steps)[None, :] < rem[:, None]).long()
    return sched


def valid_mask(completion_ids: torch.Tensor, eos_id: int) -> torch.Tensor:
    """(N, L) bool: positions up to and including the first EOS (all, when there is none)."""
    is_eos = completion_ids == eos_id
    after_first = (is_eos.long().cumsum(dim=1) - is_eos.long()) > 0
    return ~after_first


class _Draws:
    """The sampler's random draws, into float64 buffers made once per chunk and refilled every pass:
    uniforms from one generator for the whole chunk, or row by row from each row's own generator (a
    row's draws never depend on the rows beside it: data-parallel training splits batches anywhere).
    The values are torch.rand's, draw for draw (tests/unit/rl/test_cache.py's golden rollouts); the loop over
    rows issues one fill per row, the cost of keeping each row's stream its own (BENCHMARKS.md)."""

    def __init__(self, gen, device):
        self.gen, self.device, self.bufs = gen, device, {}

    def buffer(self, name: str, shape) -> torch.Tensor:
        buf = self.bufs.get(name)
        if buf is None or buf.shape != tuple(shape):
            buf = self.bufs[name] = torch.empty(shape, dtype=torch.float64, device=self.device)
        return buf

    def uniform(self, shape, name: str = "uniform") -> torch.Tensor:
        out = self.buffer(name, shape)
        if isinstance(self.gen, list):
            for row, g in zip(out, self.gen):
                row.uniform_(generator=g)
        else:
            out.uniform_(generator=self.gen)
        return out

    def gumbel(self, shape) -> torch.Tensor:
        """-log(-log u), u clamped away from 0 as before, computed in place."""
        return self.uniform(shape, "gumbel").clamp_min_(1e-300).log_().neg_().clamp_min_(1e-300).log_().neg_()


def _choose(blk: torch.Tensor, temperature: float, banned: torch.Tensor, draws: _Draws) -> torch.Tensor:
    """(N, b, V) logits -> (N, b) choices: argmax, or with temperature argmax of logits / T + Gumbel
    noise in float64 (exact: every float32 / bf16 value is a float64); `banned` ids never chosen.
    Greedy writes -inf into the banned columns of `blk` and puts them back (no copy of the whole)."""
    if temperature > 0:
        choice = draws.buffer("choice", blk.shape)
        choice.copy_(blk).div_(temperature).add_(draws.gumbel(blk.shape))
        return choice.index_fill_(-1, banned, -math.inf).argmax(-1)
    kept = blk.index_select(-1, banned)
    x0 = blk.index_fill_(-1, banned, -math.inf).argmax(-1)
    blk.index_copy_(-1, banned, kept)
    return x0


def _vocab_stats(logits: torch.Tensor, b0: int, b1: int, entropy: bool, chunk: int = LOGIT_CHUNK):
    """One pass over the vocabulary of (N, C, V) logits, `chunk` tokens at a time in float32: the (N, C)
    logsumexp and max (torch.logsumexp's own steps: max, exp of the difference, sum, log, add), and with
    `entropy` the (N, b1-b0) entropy in nats of positions b0..b1-1, log s - sum_v e_v z_v / s from the
    same z = logit - max and e = exp z (no cancellation: both terms are >= 0)."""
    n, c = logits.shape[:2]
    lse = torch.empty((n, c), dtype=torch.float32, device=logits.device)
    top = torch.empty_like(lse)
    ent = torch.empty((n, b1 - b0), dtype=torch.float32, device=logits.device) if entropy else None
    floor = torch.finfo(torch.float32).min  # a -inf logit: e = 0, and 0 * floor = 0 (not nan)
    for r, q in _chunks(logits, chunk):
        xf = logits[r, q].float()  # the logits themselves when they are float32: never written
        m = xf.amax(-1, keepdim=True)
        z = xf - m
        e = z.exp()
        s = e.sum(-1)
        log_s = s.log()
        top[r, q] = m.squeeze(-1)
        lse[r, q] = log_s + m.squeeze(-1)
        lo, hi = max(q.start, b0), min(q.stop, c, b1)
        if ent is not None and lo < hi:
            zz, ee = z[:, lo - q.start : hi - q.start], e[:, lo - q.start : hi - q.start]
            ent[r, lo - b0 : hi - b0] = (
                log_s[:, lo - q.start : hi - q.start]
                - (ee * zz.clamp_min(floor)).sum(-1) / s[:, lo - q.start : hi - q.start]
            )
    return lse, top, ent


@dataclass(frozen=True)
class Suppress:
    """LLaDA's EOS rules (its generate.py, Appendix B.4), as token ids. `never`: the logits of these
    ids are -inf (never chosen, out of the confidence too: logits_eos_inf); `late`: these ids leave
    the confidence's softmax, so a position whose choice is one of them has confidence 0 and is
    committed after every other one of its step (confidence_eos_eot_inf)."""

    never: tuple[int, ...] = ()
    late: tuple[int, ...] = ()


def _ruled_confidence(blk, x0, rule: Suppress) -> torch.Tensor:
    """(N, b) float64 log-confidence of the choices x0 under `rule`: log softmax over the vocabulary
    without never + late ids; a choice in `late` gets -1e300 (below any real one, above the -inf of
    positions that are not masked, so the schedule still commits it when its turn comes)."""
    out_ids = [i for i in {*rule.never, *rule.late} if 0 <= i < blk.shape[-1]]
    kept = blk.clone()
    kept[..., out_ids] = -math.inf
    lse = logsumexp_max(kept)[0]
    score = (kept.gather(-1, x0[..., None]).squeeze(-1).float() - lse).double()
    return torch.nan_to_num(score, nan=-1e300, neginf=-1e300)


@torch.no_grad()
def _sample_chunk(
    adapter: ModelAdapter, prompt_ids, prompt_mask, cfg: SamplerConfig, gen, record: bool, rule: Suppress | None = None
):
    """One chunk of rows. Its pass loop reads nothing back to the host (no .item(), no .any() of a device
    tensor) but, with a threshold, whether the block is done; LLaDA's schedule is known beforehand (every
    block starts with b masks in every row)."""
    device = adapter.device
    n, p = prompt_ids.shape
    L, b = cfg.gen_length, cfg.block_length
    mask_id = adapter.mask_token_id
    padded = not bool(prompt_mask.all())  # prompt_mask is still on the host: no device sync
    prompt_ids, prompt_mask = prompt_ids.to(device), prompt_mask.to(device)
    x = torch.cat([prompt_ids, torch.full((n, L), mask_id, dtype=torch.long, device=device)], dim=1)  # (N, P+L)
    attn = adapter.canvas_mask(
        torch.cat([prompt_mask, torch.ones((n, L), dtype=torch.long, device=device)], dim=1), padded
    )  # positions and the SDPA mask, made once for every pass
    parallel = cfg.threshold is not None
    kv = None if cfg.cache == "none" else KVCache()
    num_blocks = L // b
    steps_per_block = cfg.steps // num_blocks
    max_steps = L if parallel else cfg.steps
    commit_step = torch.zeros((n, L), dtype=torch.long, device=device)
    commit_logp = torch.zeros((n, L), dtype=torch.float32, device=device)
    commit_ent = torch.zeros((n, L), dtype=torch.float32, device=device) if record else None
    conf_rec = torch.full((n, max_steps, L), math.nan, dtype=torch.float32, device=device) if record else None
    conf_now = torch.full((n, L), math.nan, dtype=torch.float32, device=device) if record else None  # latest c_k
    # never commit a mask, nor a pad unless it is also the EOS (LLaDA: pad = eos), which must stay sampleable
    banned = [i for i in {mask_id, adapter.pad_token_id} - {adapter.eos_token_id} if i is not None]
    banned = torch.tensor(sorted(set(banned + (list(rule.never) if rule else []))), dtype=torch.long, device=device)
    draws = _Draws(gen, device)
    sched = transfer_schedule(torch.full((n,), b), steps_per_block)  # (N, steps) on the host: b masks per block
    block_steps = int((sched.sum(0) > 0).nonzero().max()) + 1  # the loop ends when the block has no mask left
    sched = sched.to(device)
    step = block_step if adapter.block_size else step_logits  # a block model: its own block's passes (archs/block.py)
    t = 0
    for blk in range(num_blocks):
        lo, hi = blk * b, (blk + 1) * b  # block span inside the completion
        i = 0
        while True:
            t += 1
            # (N, c1-c0, V) logits of completion positions c0..c1-1, in the model's dtype: never copied whole
            logits, c0, c1 = step(adapter, x, attn, p, lo, hi, cfg.cache, kv, fresh=i == 0, record=record)
            masked = x[:, p:] == mask_id  # (N, L): M_t
            blk_logits = logits[:, lo - c0 : hi - c0]  # (N, b, V)
            # the record's numbers from one pass over the vocabulary: max_v p = exp(max logit - logsumexp),
            # log p of the choice, the entropy of the block's positions
            lse, top, ent = _vocab_stats(logits, lo - c0, hi - c0, entropy=record)  # (N, c1-c0), (N, b)
            if record:
                conf_now[:, c0:c1] = (top - lse).exp()  # positions this pass did not recompute keep their last value
                conf_rec[:, t - 1] = torch.where(masked, conf_now, math.nan)
            lse_blk = lse[:, lo - c0 : hi - c0]
            x0 = _choose(blk_logits, cfg.temperature, banned, draws)  # (N, b)
            x0_logp = blk_logits.gather(-1, x0[..., None]).squeeze(-1).float() - lse_blk  # (N, b)
            ruled = _ruled_confidence(blk_logits, x0, rule) if rule and (rule.never or rule.late) else None
            if cfg.remasking == "low_confidence":
                score = x0_logp.double() if ruled is None else ruled
            elif cfg.remasking == "random":
                score = draws.uniform(x0.shape)
            else:
                raise ValueError(f"unknown remasking {cfg.remasking!r}; use low_confidence or random")
            blk_masked = masked[:, lo:hi]
            score = score.masked_fill(~blk_masked, -math.inf)
            rank = score.argsort(dim=1, descending=True).argsort(dim=1)  # (N, b): 0 = most confident
            if parallel:
                conf = x0_logp.exp() if ruled is None else ruled.exp()
                take = blk_masked & ((conf > cfg.threshold) | (rank == 0))
            else:
                take = blk_masked & (rank < sched[:, i : i + 1])
            i += 1
            cur = x[:, p + lo : p + hi]
            x[:, p + lo : p + hi] = torch.where(take, x0, cur)
            commit_step[:, lo:hi] = torch.where(take, t, commit_step[:, lo:hi])
            commit_logp[:, lo:hi] = torch.where(take, x0_logp, commit_logp[:, lo:hi])
            if record:
                commit_ent[:, lo:hi] = torch.where(take, ent, commit_ent[:, lo:hi])
            if not parallel:
                if i == block_steps:
                    break
            elif not bool((blk_masked & ~take).any()):  # a threshold pass's one read-back: is the block done
                break
    conf = conf_rec[:, :t] if record else None
    return x[:, p:], commit_step, commit_logp, conf, t, commit_ent


def row_seed(seed: int, *key: str) -> int:
    """A sampled row's own seed, from the run's seed and what names the row (an evaluation sample's id; an
    lm-eval request's text, settings and repeat), never from its batch, its place in it or its rank: `sample`
    given one per row draws each row's noise from its own generator (what `eval` and `lm-eval` pass)."""
    digest = hashlib.sha256("\x00".join([str(seed), "generate", *key]).encode()).hexdigest()[:16]
    return int(digest, 16) % (2**63)


def sample(
    adapter: ModelAdapter,
    prompts,
    cfg: SamplerConfig,
    seed: int | list[int] = 0,
    record: bool = True,
    rule: Suppress | None = None,
) -> RolloutBatch:
    """Sample one completion per prompt (repeat prompts for a group), in chunks of cfg.batch_size.

    `seed` is one seed for the whole call, or one per row: then each row's draws do not
    depend on the rest of the batch (what data-parallel training needs). `rule`: LLaDA's EOS
    rules (`Suppress`; an evaluation protocol's setting, none by default)."""
    L, b = cfg.gen_length, cfg.block_length
    if L % b:
        raise ValueError(f"sampler.gen_length={L} must be a multiple of sampler.block_length={b}")
    if cfg.threshold is None and cfg.steps % (L // b):
        raise ValueError(f"sampler.steps={cfg.steps} must be a multiple of the number of blocks {L // b}")
    if pick(CACHES, cfg.cache, "sampler.cache"):
        adapter.require_cache("sampler.cache")
    if (
        adapter.block_size
        and (b != adapter.block_size or cfg.cache in ("prefix", "dual"))
        or cfg.cache == "block"
        and not adapter.block_size
    ):
        raise ConfigError(
            f"sampler.block_length={b}, sampler.cache={cfg.cache}: a block model (model.block_size="
            f"{adapter.block_size}) decodes its own blocks (block_length = block_size) with cache none "
            "or block (exact); a full-attention model has no block cache"
        )
    if cfg.cache == "block" and adapter.cache_kind() not in ("bert", "native"):
        raise ConfigError(
            "sampler.cache=block runs the tiny BERT model's and the native block models' cached pass only; "
            "use sampler.cache=none"
        )
    prompt_ids, prompt_mask = pad_prompts(adapter, prompts)
    if isinstance(seed, int):
        gen = torch.Generator(device=adapter.device).manual_seed(seed)
    else:
        if len(seed) != len(prompt_ids):
            raise ValueError(f"{len(seed)} seeds for {len(prompt_ids)} prompts")
        gen = [torch.Generator(device=adapter.device).manual_seed(int(s)) for s in seed]
    outs, passes = [], 0
    for s in range(0, len(prompt_ids), cfg.batch_size):
        chunk_gen = gen[s : s + cfg.batch_size] if isinstance(gen, list) else gen
        out = _sample_chunk(
            adapter,
            prompt_ids[s : s + cfg.batch_size],
            prompt_mask[s : s + cfg.batch_size],
            cfg,
            chunk_gen,
            record,
            rule,
        )
        outs.append(out)
        passes += out[4]
    completion = torch.cat([o[0] for o in outs]).cpu()
    traj = None
    if record:
        steps = max(o[3].shape[1] for o in outs)
        conf = torch.cat(
            [torch.nn.functional.pad(o[3], (0, 0, 0, steps - o[3].shape[1]), value=math.nan) for o in outs]
        )
        traj = Trajectory(
            torch.cat([o[1] for o in outs]).cpu(),
            torch.cat([o[2] for o in outs]).cpu(),
            conf.cpu(),
            torch.cat([o[5] for o in outs]).cpu(),
            (torch.arange(L) // b).expand(len(completion), -1),
        )
    texts = [adapter.decode(row) for row in completion]
    return RolloutBatch(
        prompt_ids,
        prompt_mask,
        completion,
        valid_mask(completion, adapter.eos_token_id),
        texts,
        traj,
        passes,
        torch.cat([o[1] for o in outs]).cpu(),
    )


@torch.no_grad()
def replay_commit_logp(adapter: ModelAdapter, batch: RolloutBatch) -> torch.Tensor:
    """Recompute log p^{tau_k}_k(o_k) by rebuilding the canvas of every step: (N, L). Costs T passes:
    it is the `causal` SML estimator with one stratum per sampler step."""
    from .likelihood import sml_logprobs

    traj = batch.trajectory
    steps = int(traj.commit_step.max())
    return sml_logprobs(
        adapter,
        batch.prompt_ids,
        batch.prompt_mask,
        batch.completion_ids,
        k=steps,
        partition="causal",
        commit_step=traj.commit_step,
    ).cpu()
