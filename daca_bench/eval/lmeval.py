"""lm-evaluation-harness's model `daca`: any model the project loads, behind lm_eval's LM interface.

    daca-bench lm-eval --model daca --model_args model=tiny,gen_length=32,steps=16 --tasks TASK --include_path DIR
    torchrun --nproc_per_node 2 -m daca_bench lm-eval --model daca --model_args model=runs/sft-tiny/final --tasks gsm8k

Importing this module registers the model (lm_eval 0.4.13 discovers no plugin models by itself); the
command (`daca-bench lm-eval`, experiments/commands/lmeval.py) imports it, then hands lm_eval its own command
line. From Python: import this module, then `lm_eval.simple_evaluate(model="daca", model_args=...)`.

model_args: model (tiny | a save_pretrained folder | a hub id | a LoRA adapter folder, merged), base,
trust_remote_code, dtype; the sampler's gen_length, block_length, steps, remasking, temperature, cache
(none | prefix | dual), threshold, batch_size; the likelihood's mc_num (Monte Carlo draws), mc_batch
(canvases per forward pass), cfg (classifier-free guidance scale, LLaDA's eval_llada.py), greedy_check,
seed. Requests:
  generate_until     rl/sampler.py `sample`, batch_size prompts at a time; the text is cut at the first
                     of the request's stop strings (`until`), then its special tokens are dropped
  loglikelihood      LLaDA's Monte Carlo ELBO, rl/likelihood.py `elbo_logprobs`: mc_num draws of l ~ U{1..L}
                     masked continuation tokens, each masked token's log-probability weighted L / l;
                     is_greedy from one greedy decode of the continuation when greedy_check=true
  loglikelihood_rolling  the same ELBO of the whole string with an empty context
Under torchrun, lm_eval gives rank r the documents r::world and rank 0 writes the results.
"""
from __future__ import annotations

import hashlib

import torch
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model
from tqdm.auto import tqdm

from ..config import SamplerConfig
from ..errors import ConfigError
from ..models import default_device
from ..engine.policy import load_trained
from ..engine import parallel
from ..rl.likelihood import elbo_logprobs
from ..rl.sampler import pad_prompts, sample

TRUE = ("1", "true", "yes", "on")


class Guided:
    """An adapter whose logits are classifier-free guided (LLaDA's eval_llada.py get_logits): with the first
    `prompt_len` canvas positions masked as the unconditional pass, un + (scale + 1) (cond - un)."""

    def __init__(self, adapter, prompt_len: int, scale: float):
        self.adapter, self.prompt_len, self.scale = adapter, prompt_len, scale
        self.device, self.mask_token_id = adapter.device, adapter.mask_token_id

    def logits(self, ids, attn=None):
        un_ids = ids.clone()
        un_ids[:, :self.prompt_len] = torch.where(attn[:, :self.prompt_len].bool(), self.mask_token_id,
                                                  ids[:, :self.prompt_len]) if attn is not None else self.mask_token_id
        both = self.adapter.logits(torch.cat([ids, un_ids]), None if attn is None else torch.cat([attn, attn]))
        cond, un = both.chunk(2)
        return un + (self.scale + 1) * (cond - un)


def request_key(*parts: str) -> str:
    """A request's own seed key: its masks do not depend on the batch, the order or the rank it lands on."""
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16]


def cut_at_stops(text: str, stops) -> str:
    """`text` up to the earliest occurrence of any stop string."""
    stops = [stops] if isinstance(stops, str) else list(stops or [])
    ends = [text.find(s) for s in stops if s and s in text]
    return text[:min(ends)] if ends else text


@register_model("daca", "daca-bench")
class DacaLM(LM):
    def __init__(self, model: str = "tiny", base: str = "", trust_remote_code=False, dtype: str = "float32",
                 gen_length=128, block_length=None, steps=None, remasking: str = "low_confidence", temperature=0.0,
                 cache: str = "none", threshold=None, batch_size=8, mc_num=128, mc_batch=32, cfg=0.0,
                 greedy_check=False, seed=0, **kw):
        super().__init__()
        unknown = sorted(k for k in kw if k not in ("device", "max_batch_size", "pretrained"))
        if unknown:
            raise ConfigError(f"lm-eval --model daca: unknown model_args {', '.join(unknown)}; see "
                              "`daca_bench.eval.lmeval`'s docstring for the ones it takes")
        model = kw.get("pretrained") or model
        parallel.init_process_group()
        self._rank, self._world_size = parallel.rank_and_world()
        self.adapter = load_trained(str(model), str(trust_remote_code).lower() in TRUE, dtype, base)
        self.adapter.model.to(default_device()).eval()
        self._device = self.adapter.device
        L = int(gen_length)
        b = int(block_length or L)
        self.sampler = SamplerConfig(gen_length=L, block_length=b, steps=int(steps or L), remasking=remasking,
                                     temperature=float(temperature), cache=cache,
                                     batch_size=int(batch_size) if str(batch_size).isdigit() else 8,
                                     threshold=None if threshold in (None, "", "None") else float(threshold))
        batch_size = int(batch_size) if str(batch_size).isdigit() else 8  # lm_eval's --batch_size auto: ours
        self.batch_size, self.mc_num, self.mc_batch = int(batch_size), int(mc_num), int(mc_batch)
        self.cfg, self.seed = float(cfg), int(seed)
        self.greedy_check = str(greedy_check).lower() in TRUE
        if self.mc_num < 1:
            raise ConfigError(f"lm-eval --model daca: mc_num={mc_num} must be at least 1")

    # ---- the three request kinds --------------------------------------------------------------
    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        out = []
        bar = tqdm(total=len(requests), desc="daca generate_until", disable=disable_tqdm or self.rank)
        for s in range(0, len(requests), self.batch_size):
            part = requests[s:s + self.batch_size]
            batch = sample(self.adapter, [r.args[0] for r in part], self.sampler, seed=self.seed, record=False)
            for r, text in zip(part, batch.texts):
                out.append(self._plain(cut_at_stops(text, (r.args[1] or {}).get("until"))))
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
        pairs = [([], self.adapter.encode([r.args[0]])[0]) for r in requests]
        return self._elbo(pairs, [request_key("", r.args[0]) for r in requests], disable_tqdm)

    # ---- helpers --------------------------------------------------------------------------------
    def _encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """Context and continuation ids, the context's trailing spaces moved to the continuation and the
        continuation's ids read off the whole text's (LLaDA's eval_llada.py, lm_eval's convention)."""
        spaces = len(context) - len(context.rstrip())
        if spaces:
            context, continuation = context[:-spaces], context[-spaces:] + continuation
        whole, ctx = self.adapter.encode([context + continuation, context])
        if not whole[len(ctx):]:
            raise ConfigError(f"lm-eval --model daca: the continuation {continuation!r} has no tokens of its own")
        return ctx, whole[len(ctx):]

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
                part = idx[s:s + self.batch_size]
                ids, mask = pad_prompts(self.adapter, [pairs[i][0] for i in part])
                completion = torch.tensor([pairs[i][1] for i in part])
                scorer = Guided(self.adapter, ids.shape[1], self.cfg) if self.cfg > 0 else self.adapter
                logp = elbo_logprobs(scorer, ids, mask, completion, draws=self.mc_num, seq_ids=[keys[i] for i in part],
                                     seed=self.seed, chunk=self.mc_batch)
                for i, v in zip(part, logp.sum(-1).tolist()):
                    out[i] = float(v)
                bar.update(len(part))
        bar.close()
        return out

    def _is_greedy(self, context: list[int], target: list[int]) -> bool:
        """Whether greedy decoding of len(target) masks after the context, one token a step, writes the target."""
        L = len(target)
        cfg = SamplerConfig(gen_length=L, block_length=L, steps=L, temperature=0.0, batch_size=1)
        got = sample(self.adapter, [context], cfg, seed=self.seed, record=False).completion_ids[0].tolist()
        return got == list(target)

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
            raise ConfigError(f"lm-eval --model daca: {self.adapter.source} has no chat template; drop --apply_chat_template")
        return self.adapter.tokenizer.apply_chat_template(chat_history, tokenize=False,
                                                          add_generation_prompt=add_generation_prompt)

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
