"""Model adapter: one interface over every masked diffusion LM the harness can train.

    adapter = load_model(ModelConfig(name="tiny"))      # daca_bench.models: any source -> a ModelAdapter
    logits = adapter.logits(input_ids, attention_mask)  # (N, P+L, V)

`ModelAdapter` wraps a transformers model and its tokenizer: the mask / EOS / pad ids, Dream's shift
(its raw logits moved right by one position so that logits[i] predicts token i), a block model's
attention (archs/block.py), the KV-cached pass (`forward_cached`), decoding and saving.
`CanvasMask` is an attention mask prepared once for the many passes of a rollout.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from pathlib import Path

import torch

from .archs.block import block_logits
from .errors import ConfigError


@dataclass
class CanvasMask:
    """An (N, S) attention mask prepared once for many forward passes (`ModelAdapter.canvas_mask`)."""

    mask: torch.Tensor  # (N, S) 1/0
    positions: torch.Tensor  # (N, S) position ids, 0 at each row's first real token
    padded: bool  # any 0 in mask (known on the host)
    sdpa: torch.Tensor  # (N, 1, 1, S) bool: the form the native classes hand to SDPA


@dataclass
class ModelAdapter:
    model: torch.nn.Module
    tokenizer: object
    mask_token_id: int
    eos_token_id: int
    pad_token_id: int
    shift_logits: bool = False  # Dream predicts position i from the hidden state at i-1
    source: str = "tiny"
    square_mask: bool = False  # the published Dream code takes only None or a (B, 1, L, L) bool mask
    block_size: int = (
        0  # block diffusion: causal across blocks of this many tokens (archs/block.py); 0 = full attention
    )

    def __post_init__(self):
        core = self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model  # peft
        params = inspect.signature(core.forward).parameters
        self._takes_positions = "position_ids" in params
        self._takes_mask = "attention_mask" in params
        self._keep_arg = next((k for k in ("logits_to_keep", "num_logits_to_keep") if k in params), None)
        self._row_memo: dict = {}

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def logits(
        self, input_ids: torch.Tensor, attention_mask=None, keep: tuple | None = None, clean=None
    ) -> torch.Tensor:
        """(N, P+L) ids -> (N, P+L, V) logits. Left padding is given positions from 0 at the first real token.
        attention_mask: (N, P+L) 1/0, or a `CanvasMask` prepared once for many passes (`canvas_mask`).
        keep = (a, b): the logits of positions a..b-1 only, (N, b-a, V): the output layer runs on those
        rows only where the model takes `logits_to_keep` (the native LLaDA and Dream classes, remote code
        that has the argument; `num_logits_to_keep`: the suffix from a); otherwise (BertForMaskedLM, the
        published LLaDA code) it runs on every row and the rows are sliced after. clean: (N, L), a block model's clean
        completion (its canvas ends in a noisy copy: the clean earlier blocks are read there, archs/block.py)."""
        if self.block_size:
            return block_logits(self, input_ids, attention_mask, keep, clean)
        kw = self._mask_kwargs(attention_mask)
        if keep is not None and tuple(keep) == (0, input_ids.shape[1]):
            keep = None  # every row: the plain call
        if keep is None:
            out = self.model(input_ids=input_ids, **kw)
            logits = out.logits if hasattr(out, "logits") else out[0]
            if self.shift_logits:
                logits = torch.cat([logits[:, :1], logits[:, :-1]], dim=1)
            return logits
        rows = self._rows(keep, 0, input_ids.device)  # raw output rows, Dream's shift included
        first = max(keep[0] - 1, 0) if self.shift_logits else keep[0]
        if self._keep_arg == "logits_to_keep":
            kw["logits_to_keep"] = rows
        elif self._keep_arg == "num_logits_to_keep":
            kw["num_logits_to_keep"] = input_ids.shape[1] - first
        out = self.model(input_ids=input_ids, **kw)
        logits = out.logits if hasattr(out, "logits") else out[0]
        if self._keep_arg == "logits_to_keep":
            return logits
        return logits.index_select(1, rows - first if self._keep_arg else rows)

    def canvas_mask(self, attention_mask: torch.Tensor, padded: bool) -> CanvasMask:
        """An (N, S) 1/0 mask prepared once for every pass over canvases of its shape (a rollout): the
        position ids, and `padded` (whether any row has a 0, which the caller knows on the host: no device
        sync per pass). Unpadded, the model is called without a mask (SDPA free to pick its fused kernel);
        padded, the native classes get the (N, 1, 1, S) bool form SDPA takes, built once."""
        positions = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
        return CanvasMask(attention_mask, positions, bool(padded), attention_mask.bool()[:, None, None, :])

    def _mask_kwargs(self, attention_mask) -> dict:
        """The mask and position keyword arguments of one call of the model."""
        kw = {}
        if isinstance(attention_mask, CanvasMask):
            if not attention_mask.padded:
                return kw  # positions 0..S-1 and no mask: what an all-ones mask gives
            if self.cache_kind() == "native":
                return {"attention_mask": attention_mask.sdpa, "position_ids": attention_mask.positions}
            positions, attention_mask = attention_mask.positions, attention_mask.mask
        else:
            positions = None
        if attention_mask is not None and self._takes_mask:
            keep = attention_mask.bool()  # (N, P+L)
            kw["attention_mask"] = (
                keep[:, None, None, :].expand(-1, 1, keep.shape[1], -1) if self.square_mask else attention_mask
            )  # (N, 1, P+L, P+L) bool for the published Dream code
        if attention_mask is not None and self._takes_positions:
            kw["position_ids"] = (
                positions if positions is not None else (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
            )
        return kw

    def _rows(self, keep: tuple[int, int], first: int, device) -> torch.Tensor:
        """A 1-D index tensor of the raw output rows that give positions keep[0]..keep[1]-1 of a pass whose
        first raw row is canvas position `first` (Dream: raw row j-1 predicts j, position 0 its own row);
        made once per (keep, first, device)."""
        key = (keep, first, str(device))
        rows = self._row_memo.get(key)
        if rows is None:
            if len(self._row_memo) > 256:
                self._row_memo.clear()
            rows = torch.arange(*keep, device=device)
            rows = (rows - 1).clamp(min=0) - first if self.shift_logits else rows - first
            self._row_memo[key] = rows
        return rows

    def cache_kind(self) -> str | None:
        """Which KV-cached pass this model has: "native" (daca_bench.archs' LLaDA and Dream), "bert"
        (the tiny model), or None (the published remote code, other hub models)."""
        from .archs import NATIVE
        from .archs.bert import supports

        core = self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model
        return "native" if isinstance(core, tuple(NATIVE.values())) else "bert" if supports(core) else None

    def require_cache(self, key: str = "sampler.cache") -> str:
        """`cache_kind`, or one ConfigError naming `key` for a model without a cached pass."""
        kind = self.cache_kind()
        if kind is None:
            core = self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model
            raise ConfigError(
                f"{key}: {type(core).__name__} ({self.source}) has no KV-cached forward pass; "
                f"set {key}=none, or load LLaDA / Dream without model.trust_remote_code"
            )
        return kind

    def forward_cached(
        self,
        input_ids: torch.Tensor,
        attention_mask,
        cache,
        window=None,
        key: str = "sampler.cache",
        keep: tuple[int, int] | None = None,
    ) -> torch.Tensor:
        """The KV-cached pass (`sampler.cache`). (N, S) canvas ids and 1/0 mask (or a `CanvasMask`), a
        `KVCache`: window None -> a full pass that (re)fills the cache, (N, S, V) logits as `logits` gives;
        window (lo, hi) -> only positions lo..hi-1 recomputed against the cached keys of the rest,
        (N, hi-lo, V) logits for those positions. keep = (a, b), inside the pass's positions: the output
        layer runs on positions a..b-1 only, (N, b-a, V)."""
        kind = self.require_cache(key)
        S = input_ids.shape[1]
        first, hi = window or (0, S)
        lo = first - 1 if self.shift_logits and first > 0 else first  # Dream: the raw row before predicts `first`
        cache.window = None if window is None else (lo, hi)
        if isinstance(attention_mask, CanvasMask):
            positions, mask = attention_mask.positions, attention_mask.sdpa if attention_mask.padded else None
        else:
            positions, mask = (attention_mask.long().cumsum(-1) - 1).clamp(min=0), attention_mask  # as in `logits`
        if keep is not None and not self.shift_logits and tuple(keep) == (lo, hi):
            keep = None  # every row of the pass: the plain call
        rows = None if keep is None else self._rows(keep, lo, input_ids.device)
        kw = {
            "input_ids": input_ids[:, lo:hi],
            "attention_mask": mask,
            "position_ids": positions[:, lo:hi],
            "past_key_values": cache,
            "logits_to_keep": rows,
        }
        if kind == "native":
            out = self.model(**kw).logits
        else:
            from .archs.bert import bert_cached

            core = self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model
            out = _as_call(
                self.model, kw, lambda: bert_cached(core, kw["input_ids"], mask, kw["position_ids"], cache, rows)
            )
        if rows is not None:
            return out
        if self.shift_logits:  # (N, hi-lo, V): raw row i-1 predicts position i; position 0 keeps its own row
            out = out[:, :-1] if first > 0 else torch.cat([out[:, :1], out[:, :-1]], dim=1)
        return out

    def encode(self, texts: list[str]) -> list[list[int]]:
        return [self.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]

    def decode(self, ids) -> str:
        """Decode up to the first EOS; ids the tokenizer cannot decode (Dream) are dropped."""
        out = []
        vocab = len(self.tokenizer)
        for i in ids.tolist() if torch.is_tensor(ids) else ids:
            if i == self.eos_token_id:
                break
            if 0 <= i < vocab and i not in (self.pad_token_id, self.mask_token_id):
                out.append(i)
        return self.tokenizer.decode(out, skip_special_tokens=False)

    def decode_token(self, i: int) -> str:
        """One id as text; "" for an id the tokenizer cannot decode (Dream's output layer is larger than its vocabulary)."""
        if not 0 <= int(i) < len(self.tokenizer):
            return ""
        try:
            return self.tokenizer.decode([int(i)], skip_special_tokens=False)
        except (IndexError, KeyError, TypeError, ValueError, OverflowError):
            return ""

    def save(self, path: str | Path) -> None:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # one bar per checkpoint would drown the training bar
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(path)
        self.tokenizer.save_pretrained(path)
        meta = {"shift_logits": self.shift_logits, "source": self.source, "block_size": self.block_size}
        (path / "daca_adapter.json").write_text(json.dumps(meta))


def _as_call(module: torch.nn.Module, kwargs: dict, run):
    """run() as if it were module(**kwargs) to the module's forward hooks (pass counters, the compute
    ledger: rl/ledger.py), for a pass that goes through the module's parts rather than its forward."""
    for hid, hook in list(module._forward_pre_hooks.items()):
        hook(module, (), kwargs) if hid in module._forward_pre_hooks_with_kwargs else hook(module, ())
    out = run()
    for hid, hook in list(module._forward_hooks.items()):
        hook(module, (), kwargs, out) if hid in module._forward_hooks_with_kwargs else hook(module, (), out)
    return out
