"""lm-evaluation-harness's model `daca`: any model the project loads, behind lm_eval's LM interface.

    daca-bench lm-eval --model daca --model_args model=tiny,gen_length=32,steps=16 --tasks TASK --include_path DIR
    torchrun --nproc_per_node 2 -m daca_bench lm-eval --model daca --model_args model=runs/sft-tiny/final --tasks gsm8k

Importing this module registers the model (lm_eval 0.4.13 discovers no plugin models by itself); the
command (`daca-bench lm-eval`, experiments/commands/lmeval.py) imports it, then hands lm_eval its own command
line. From Python: import this module, then `lm_eval.simple_evaluate(model="daca", model_args=...)`.

model_args: model (tiny | a save_pretrained folder | a hub id | a LoRA adapter folder, merged), base,
trust_remote_code, dtype; the sampler's gen_length, block_length, steps, remasking, temperature, cache
(none | prefix | dual), threshold, batch_size (here or lm_eval's --batch_size; `auto` is refused); the
likelihood's mc_num (Monte Carlo draws), mc_batch (canvases per forward pass), cfg (classifier-free
guidance scale in generation and likelihood, as LLaDA's eval_llada.py), greedy_check, seed, max_length
(default: the model's positions). Requests:
  generate_until     rl/sampler.py `sample`, batch_size prompts of one setting at a time; the request's
                     gen_kwargs as lm_eval normalises them: max_gen_toks sets the canvas length (the block
                     kept where it divides it, else the whole canvas; the model_args' tokens per step kept),
                     temperature / do_sample the temperature (model_args' when the request names neither);
                     each request its own seed (its text and settings), so sampled rows do not depend on
                     the batch or the rank; the context left-truncated to max_length - canvas; the text
                     cut at the first of the request's stop strings (`until`), special tokens dropped
  loglikelihood      LLaDA's Monte Carlo ELBO, rl/likelihood.py `elbo_logprobs`: mc_num draws of l ~ U{1..L}
                     masked continuation tokens, each masked token's log-probability weighted L / l;
                     is_greedy from one greedy decode of the continuation when greedy_check=true
                     (the context left-truncated so that context + continuation fit max_length)
  loglikelihood_rolling  the same ELBO of the whole string with an empty context, in lm_eval's disjoint
                     rolling windows of max_length tokens where it is longer
A block model (SDAR, LLaDA2, the tiny block model; docs/method.md 12.9) decodes its own blocks: block_length
is its block size, a request's canvas is max_gen_toks rounded up to whole blocks and its text read from the
first max_gen_toks tokens; loglikelihood's canvases carry the clean stream (each block scored behind its clean
predecessors), which makes the one whole-continuation draw the block-wise ELBO in expectation (tested by
enumeration), a continuation short of a whole block padded with masks that are never scored; cfg is refused.
Under torchrun, lm_eval gives rank r the documents r::world and rank 0 writes the results.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import replace

import torch
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model
from lm_eval.models.utils import normalize_gen_kwargs
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window
from tqdm.auto import tqdm

from ..canvas import positions
from ..config import SamplerConfig
from ..engine import parallel
from ..engine.policy import load_trained
from ..errors import ConfigError
from ..models import default_device
from ..rl.likelihood import elbo_logprobs
from ..rl.sampler import pad_prompts, row_seed, sample

TRUE = ("1", "true", "yes", "on")


class Guided:
    """An adapter whose logits are classifier-free guided (LLaDA's eval_llada.py get_logits): with the first
    `prompt_len` canvas positions masked as the unconditional pass, un + (scale + 1) (cond - un)."""

    def __init__(self, adapter, prompt_len: int, scale: float):
        self.adapter, self.prompt_len, self.scale = adapter, prompt_len, scale
        self.device, self.mask_token_id = adapter.device, adapter.mask_token_id

    def __getattr__(self, name):  # the sampler reads the adapter's ids, tokenizer and switches through it
        return getattr(self.adapter, name)

    def canvas_mask(self, attention_mask, padded):  # a plain mask: it is doubled for the two passes
        return attention_mask

    def logits(self, ids, attn=None, keep=None):
        un_ids = ids.clone()
        un_ids[:, : self.prompt_len] = (
            torch.where(attn[:, : self.prompt_len].bool(), self.mask_token_id, ids[:, : self.prompt_len])
            if attn is not None
            else self.mask_token_id
        )
        both = self.adapter.logits(
            torch.cat([ids, un_ids]), None if attn is None else torch.cat([attn, attn]), keep=keep
        )
        cond, un = both.chunk(2)
        return un + (self.scale + 1) * (cond - un)


def request_key(*parts: str) -> str:
    """A request's own seed key: its masks do not depend on the batch, the order or the rank it lands on."""
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16]


def batch_size_arg(value, where: str) -> int:
    """lm_eval's batch size (a number) as an int; `auto` and anything else are refused in one line."""
    text = str(value).strip()
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(
            f"lm-eval --model daca: batch_size={value} ({where}) must be a whole number of prompts; "
            "this backend does not measure `auto` (the sampler's memory grows with the canvas): "
            "give --batch_size N"
        )
    return int(text)


def cut_at_stops(text: str, stops) -> str:
    """`text` up to the earliest occurrence of any stop string."""
    stops = [stops] if isinstance(stops, str) else list(stops or [])
    ends = [text.find(s) for s in stops if s and s in text]
    return text[: min(ends)] if ends else text


@register_model("daca", "daca-bench")
class DacaLM(LM):
    def __init__(
        self,
        model: str = "tiny",
        base: str = "",
        trust_remote_code=False,
        dtype: str = "float32",
        gen_length=128,
        block_length=None,
        steps=None,
        remasking: str = "low_confidence",
        temperature=0.0,
        cache: str = "none",
        threshold=None,
        batch_size=None,
        mc_num=128,
        mc_batch=32,
        cfg=0.0,
        greedy_check=False,
        seed=0,
        max_length=None,
        **kw,
    ):
        super().__init__()
        unknown = sorted(k for k in kw if k not in ("device", "max_batch_size", "pretrained"))
        if unknown:
            raise ConfigError(
                f"lm-eval --model daca: unknown model_args {', '.join(unknown)}; see "
                "`daca_bench.eval.lmeval`'s docstring for the ones it takes"
            )
        model = kw.get("pretrained") or model
        parallel.init_process_group()
        self._rank, self._world_size = parallel.rank_and_world()
        self.adapter = load_trained(str(model), str(trust_remote_code).lower() in TRUE, dtype, base)
        self.adapter.model.to(default_device()).eval()
        self._device = self.adapter.device
        L = int(gen_length)
        self.block = int(getattr(self.adapter, "block_size", 0) or 0)  # a block model decodes its own blocks
        b = int(block_length or self.block or L)
        if self.block and (b != self.block or L % b):
            raise ConfigError(
                f"lm-eval --model daca: {model} is a block model (block size {self.block}): block_length must be "
                f"{self.block} and gen_length a multiple of it (got {b}, {L})"
            )
        if self.block and float(cfg) > 0:
            raise ConfigError(f"lm-eval --model daca: cfg={cfg} is not defined for a block model ({model}); drop it")
        self.batch_size = batch_size_arg(8 if batch_size is None else batch_size, "model_args or --batch_size")
        self.sampler = SamplerConfig(
            gen_length=L,
            block_length=b,
            steps=int(steps or L),
            remasking=remasking,
            temperature=float(temperature),
            cache=cache,
            batch_size=self.batch_size,
            threshold=None if threshold in (None, "", "None") else float(threshold),
        )
        self.mc_num, self.mc_batch = int(mc_num), int(mc_batch)
        self.cfg, self.seed = float(cfg), int(seed)
        self.max_length = (
            int(max_length) if max_length not in (None, "", "None") else positions(self.adapter.model.config)
        )
        if self.cfg > 0 and cache != "none":
            raise ConfigError(f"lm-eval --model daca: cfg={cfg} guides the uncached passes only; drop cache={cache}")
        self.greedy_check = str(greedy_check).lower() in TRUE
        if self.mc_num < 1:
            raise ConfigError(f"lm-eval --model daca: mc_num={mc_num} must be at least 1")

    @classmethod
    def create_from_arg_string(cls, arg_string: str, additional_config: dict | None = None):
        """lm_eval's constructor path: a batch_size in --model_args wins over --batch_size (lm_eval passes both)."""
        from lm_eval import utils

        args = utils.simple_parse_args_string(arg_string)
        extra = {k: v for k, v in (additional_config or {}).items() if v is not None and k not in args}
        return cls(**args, **extra)

    # ---- the three request kinds --------------------------------------------------------------
    def request_sampler(self, gen_kwargs: dict | None) -> tuple[SamplerConfig, list[str], int]:
        """The sampler of one generate_until request, its stop strings and the tokens it keeps (the module's
        docstring): a block model's canvas is max_gen_toks rounded up to whole blocks, cut back after decoding."""
        gen_kwargs = dict(gen_kwargs or {})
        named = "temperature" in gen_kwargs or "do_sample" in gen_kwargs
        kw = normalize_gen_kwargs(gen_kwargs, self.sampler.gen_length)
        temperature = float(kw.get("temperature", 0.0)) if named else self.sampler.temperature
        if kw.get("do_sample") and temperature <= 0:
            raise ConfigError("lm-eval --model daca: do_sample=true needs temperature > 0 (the sampler is greedy at 0)")
        L = int(kw["max_gen_toks"])
        if L < 1:
            raise ConfigError(f"lm-eval --model daca: max_gen_toks={L} must be at least 1")
        cfg = self.sampler
        canvas = L + self._pad(L)
        b = cfg.block_length if canvas % cfg.block_length == 0 else canvas
        blocks = canvas // b
        per_step = cfg.gen_length / cfg.steps
        steps = blocks * max(1, math.ceil(canvas / per_step / blocks))
        until = kw.get("until") or []
        stops = [until] if isinstance(until, str) else list(until)
        return replace(cfg, gen_length=canvas, block_length=b, steps=steps, temperature=temperature), stops, L

    def _context_ids(self, context: str, room: int) -> list[int]:
        """The context's ids, left-truncated to `room` tokens (lm_eval's HF model truncates the same side)."""
        ids = self.adapter.encode([context])[0]
        if room < 1:
            raise ConfigError(
                f"lm-eval --model daca: max_length={self.max_length} leaves no room for a context; "
                "lower max_gen_toks or gen_length"
            )
        return ids[-room:]

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        out: list[str | None] = [None] * len(requests)
        groups, seen = {}, {}
        for i, r in enumerate(requests):  # one sampler per setting; a request's seed names its repeat
            cfg, until, keep = self.request_sampler(r.args[1])
            key = (r.args[0], repr(replace(cfg, batch_size=1)), *([str(keep)] if keep != cfg.gen_length else []))
            seen[key] = seen.get(key, -1) + 1  # the batch size changes no row
            groups.setdefault((cfg, keep), []).append((i, until, row_seed(self.seed, *key, str(seen[key]))))
        bar = tqdm(total=len(requests), desc="daca generate_until", disable=disable_tqdm or self.rank)
        for (cfg, keep), items in groups.items():
            room = (self.max_length - cfg.gen_length) if self.max_length else None
            for s in range(0, len(items), self.batch_size):
                part = items[s : s + self.batch_size]
                ids = [
                    self._context_ids(requests[i].args[0], room)
                    if room is not None
                    else self.adapter.encode([requests[i].args[0]])[0]
                    for i, _, _ in part
                ]
                model = Guided(self.adapter, max(len(x) for x in ids), self.cfg) if self.cfg > 0 else self.adapter
                batch = sample(model, ids, cfg, seed=[sd for _, _, sd in part], record=False)
                texts = (
                    batch.texts
                    if keep == cfg.gen_length
                    else [self.adapter.decode(r[:keep]) for r in batch.completion_ids]
                )
                for (i, until, _), text in zip(part, texts):
                    out[i] = self._plain(cut_at_stops(text, until))
                bar.update(len(part))
        bar.close()
        return out

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        pairs = [self._encode_pair(*r.args) for r in requests]
        keys = [request_key(*r.args) for r in requests]
        scores = self._elbo(pairs, keys, disable_tqdm)
        greedy = [self._is_greedy(c, t) if self.greedy_check else False for c, t in pairs]
        return list(zip(scores, greedy))

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        """Each string's ELBO; longer than max_length, the sum over lm_eval's disjoint rolling windows."""
        pairs, keys, owner = [], [], []
        for n, r in enumerate(requests):
            ids = self.adapter.encode([r.args[0]])[0]
            fit = None if self.max_length is None else self.max_length - self._pad(len(ids))  # a block model's padding
            if fit is None or len(ids) <= fit:
                windows = [([], ids)]
            else:
                windows = [
                    make_disjoint_window(w)
                    for w in get_rolling_token_windows(
                        ids,
                        prefix_token=self.adapter.eos_token_id,
                        max_seq_len=self.max_length - max(0, self.block - 1),  # room for a window's padding
                        context_len=1,
                    )
                ]
            for w, (ctx, cont) in enumerate(windows):
                pairs.append((list(ctx), list(cont)))
                keys.append(request_key("", r.args[0]) if len(windows) == 1 else request_key("", r.args[0], str(w)))
                owner.append(n)
        scores = self._elbo(pairs, keys, disable_tqdm)
        out = [0.0] * len(requests)
        for n, v in zip(owner, scores):
            out[n] += v
        return out

    # ---- helpers --------------------------------------------------------------------------------
    def _encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """Context and continuation ids, the context's trailing spaces moved to the continuation and the
        continuation's ids read off the whole text's (LLaDA's eval_llada.py, lm_eval's convention)."""
        spaces = len(context) - len(context.rstrip())
        if spaces:
            context, continuation = context[:-spaces], context[-spaces:] + continuation
        whole, ctx = self.adapter.encode([context + continuation, context])
        cont = whole[len(ctx) :]
        if not cont:
            raise ConfigError(f"lm-eval --model daca: the continuation {continuation!r} has no tokens of its own")
        need = len(cont) + self._pad(len(cont))  # a block model scores whole blocks
        if self.max_length is not None and len(ctx) + need > self.max_length:
            if need >= self.max_length:
                raise ConfigError(
                    f"lm-eval --model daca: a continuation of {len(cont)} tokens does not fit "
                    f"max_length={self.max_length}"
                )
            ctx = ctx[len(ctx) + need - self.max_length :]  # the context's oldest tokens go, as lm_eval's HF model
        return ctx, cont

    @torch.no_grad()
    def _elbo(self, pairs, keys, disable_tqdm: bool) -> list[float]:
        """Each (context, continuation) pair's ELBO, elbo_logprobs summed over the continuation; pairs of one
        continuation length share the forward passes, batch_size pairs at a time."""
        out = [0.0] * len(pairs)
        by_length = {}
        for i, (_, cont) in enumerate(pairs):
            by_length.setdefault(len(cont), []).append(i)
        bar = tqdm(total=len(pairs), desc="daca loglikelihood", disable=disable_tqdm or self.rank)
        for idx in by_length.values():
            for s in range(0, len(idx), self.batch_size):
                part = idx[s : s + self.batch_size]
                ids, mask = pad_prompts(self.adapter, [pairs[i][0] for i in part])
                completion = torch.tensor([pairs[i][1] for i in part])
                scorer = Guided(self.adapter, ids.shape[1], self.cfg) if self.cfg > 0 else self.adapter
                logp = elbo_logprobs(
                    scorer,
                    ids,
                    mask,
                    completion,
                    draws=self.mc_num,
                    seq_ids=[keys[i] for i in part],
                    seed=self.seed,
                    chunk=self.mc_batch,
                    pad=self._pad(len(pairs[part[0]][1])),
                )
                for i, v in zip(part, logp.sum(-1).tolist()):
                    out[i] = float(v)
                bar.update(len(part))
        bar.close()
        return out

    def _pad(self, length: int) -> int:
        """Mask tokens after a continuation of LENGTH tokens that fill its last block (0 without blocks)."""
        return -length % self.block if self.block else 0

    def _is_greedy(self, context: list[int], target: list[int]) -> bool:
        """Whether greedy decoding of len(target) masks after the context, one token a step, writes the target
        (a block model: whole blocks of masks, the first len(target) tokens read)."""
        L = len(target)
        canvas = L + self._pad(L)  # a block model: whole blocks, cut back
        cfg = SamplerConfig(
            gen_length=canvas, block_length=self.block or L, steps=canvas, temperature=0.0, batch_size=1
        )
        got = sample(self.adapter, [context], cfg, seed=self.seed, record=False).completion_ids[0].tolist()
        return got[:L] == list(target)

    def _plain(self, text: str) -> str:
        for tok in getattr(self.adapter.tokenizer, "all_special_tokens", []):
            text = text.replace(tok, "")
        return text

    # ---- lm_eval's chat and data-parallel hooks ---------------------------------------------------
    @property
    def tokenizer_name(self) -> str:
        return str(self.adapter.source).replace("/", "__")

    def apply_chat_template(self, chat_history, add_generation_prompt: bool = True) -> str:
        if not getattr(self.adapter.tokenizer, "chat_template", None):
            raise ConfigError(
                f"lm-eval --model daca: {self.adapter.source} has no chat template; drop --apply_chat_template"
            )
        return self.adapter.tokenizer.apply_chat_template(
            chat_history, tokenize=False, add_generation_prompt=add_generation_prompt
        )

    def all_gather(self, tensor):
        if self.world_size == 1:
            return tensor
        parts = [torch.zeros_like(tensor) for _ in range(self.world_size)]
        torch.distributed.all_gather(parts, tensor)
        return torch.stack(parts) if tensor.dim() == 0 else torch.cat(parts)

    def gather_object(self, obj, dst=0):
        if self.world_size == 1:
            return [obj]
        out = [None] * self.world_size if self.rank == dst else None
        torch.distributed.gather_object(obj, out, dst=dst)
        return out

    def barrier(self) -> None:
        parallel.barrier()
