"""Model adapter: one interface over every masked diffusion LM the harness can train.

    adapter = load_model(ModelConfig(name="tiny"))      # built from a config, ~0.8M params
    logits = adapter.logits(input_ids, attention_mask)  # (N, P+L, V)

Sources: the built-in tiny model (a bidirectional BERT masked LM with a character-level
tokenizer built offline with `tokenizers`), any folder saved with `save_pretrained`, any hub
masked LM (`AutoModelForMaskedLM`), and LLaDA / Dream through the native classes of
`daca_bench.archs`, picked by the folder's model_type (the published remote code stays behind
`trust_remote_code`, patched for transformers 5). Mask id from the tokenizer or config; Dream's
raw logits are shifted right by one position so that logits[i] predicts token i.
"""
from __future__ import annotations

import inspect
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from .archs.block import block_logits
from .config import ModelConfig, pick
from .errors import ConfigError, UnavailableError
from .chars import build_char_tokenizer

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
def build_tiny_model(cfg: ModelConfig, tokenizer):
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(cfg.seed)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_layers,
                        num_attention_heads=cfg.num_heads, intermediate_size=cfg.intermediate_size,
                        max_position_embeddings=cfg.max_positions, pad_token_id=tokenizer.pad_token_id,
                        type_vocab_size=1, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return BertForMaskedLM(config)


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
    block_size: int = 0  # block diffusion: causal across blocks of this many tokens (archs/block.py); 0 = full attention

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

    def logits(self, input_ids: torch.Tensor, attention_mask=None, keep: tuple | None = None, clean=None) -> torch.Tensor:
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
            kw["attention_mask"] = keep[:, None, None, :].expand(-1, 1, keep.shape[1], -1) if self.square_mask \
                else attention_mask  # (N, 1, P+L, P+L) bool for the published Dream code
        if attention_mask is not None and self._takes_positions:
            kw["position_ids"] = positions if positions is not None else (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
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
            raise ConfigError(f"{key}: {type(core).__name__} ({self.source}) has no KV-cached forward pass; "
                              f"set {key}=none, or load LLaDA / Dream without model.trust_remote_code")
        return kind

    def forward_cached(self, input_ids: torch.Tensor, attention_mask, cache, window=None,
                       key: str = "sampler.cache", keep: tuple[int, int] | None = None) -> torch.Tensor:
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
        kw = {"input_ids": input_ids[:, lo:hi], "attention_mask": mask, "position_ids": positions[:, lo:hi],
              "past_key_values": cache, "logits_to_keep": rows}
        if kind == "native":
            out = self.model(**kw).logits
        else:
            from .archs.bert import bert_cached

            core = self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model
            out = _as_call(self.model, kw, lambda: bert_cached(core, kw["input_ids"], mask, kw["position_ids"], cache,
                                                                rows))
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
        for i in (ids.tolist() if torch.is_tensor(ids) else ids):
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


def _mask_id(tokenizer, config) -> int:
    for value in (getattr(tokenizer, "mask_token_id", None), getattr(config, "mask_token_id", None)):
        if value is not None:
            return int(value)
    raise ValueError("model has no mask token: neither its tokenizer nor its config defines mask_token_id")


def _eos_id(tokenizer, config) -> int:
    for value in (getattr(tokenizer, "eos_token_id", None), getattr(config, "eos_token_id", None)):
        if isinstance(value, list):
            value = value[0] if value else None
        if value is not None:
            return int(value)
    raise ValueError("model has no EOS token in its tokenizer or config")


def load_tokenizer(name: str, trust_remote_code: bool = False):
    """A folder's or hub id's tokenizer. Dream ships its own tokenizer class (Qwen2's byte-level BPE
    under another name): without trust_remote_code it loads as transformers' Qwen2 tokenizer."""
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # a model_type AutoConfig does not know (llada, Dream) is fine here
    try:
        return AutoTokenizer.from_pretrained(name, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        if trust_remote_code or "trust_remote_code" not in str(exc) or "dream" not in _model_type(name):
            raise
    finally:
        hf_logging.set_verbosity(level)
    from transformers import Qwen2TokenizerFast

    return Qwen2TokenizerFast.from_pretrained(name)


def _model_type(name: str) -> str:
    """config.json's model_type of a local folder or a cached hub id, lower-cased ("" when unknown)."""
    path = Path(name) / "config.json"
    if not path.exists():
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(name, "config.json")
        except ValueError:
            cached = None
        path = Path(cached) if isinstance(cached, str) else None
    try:
        return str(json.loads(path.read_text()).get("model_type", "")).lower() if path else ""
    except (OSError, ValueError):
        return ""


def _remote_class(config, name: str, key: str):
    """The published remote-code class, patched in memory for the installed transformers."""
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    from .archs.remote import patch_module

    cls = get_class_from_dynamic_module(config.auto_map[key], name)
    patch_module(sys.modules[cls.__module__])
    cls.register_for_auto_class(key)  # save_pretrained then copies the code beside the weights, as AutoModel does
    return cls


def load_pretrained(name: str, trust_remote_code: bool = False, dtype: str = "float32",
                    quantization_config=None) -> ModelAdapter:
    """A local save_pretrained folder or a hub id: masked LMs; LLaDA and Dream through the native
    classes (daca_bench.archs) unless trust_remote_code asks for their own code. `quantization_config`
    (bitsandbytes 4-bit, train.load_in_4bit) goes to from_pretrained."""
    from transformers import AutoConfig, AutoModelForMaskedLM
    from transformers.utils import logging as hf_logging

    from .archs import SHIFTED, native_class

    hf_logging.disable_progress_bar()
    torch_dtype = pick(DTYPES, dtype, "model.dtype")
    quant = {"quantization_config": quantization_config, "device_map": {"": default_device()}} if quantization_config else {}
    native = None if trust_remote_code else native_class(_model_type(name))
    try:
        config = native.config_class.from_pretrained(name) if native else \
            AutoConfig.from_pretrained(name, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:  # a missing folder, a malformed hub id, not cached offline
        if "trust_remote_code" in str(exc):
            raise ConfigError(f"{name} ships its own model code; pass model.trust_remote_code=true "
                              "(--trust-remote-code on the command line)") from exc
        if Path(name).is_dir():
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise UnavailableError(f"cannot load the model folder {name}: {first} Point it at a save_pretrained "
                                   "folder (e.g. an SFT run's final/)") from exc
        raise UnavailableError(f"cannot load model {name!r}: it is neither a save_pretrained folder nor a hub id "
                               "in the local cache; check the path (model.name, train.init or --model)") from exc
    tokenizer = load_tokenizer(name, trust_remote_code)
    model_type = str(getattr(config, "model_type", "")).lower()
    family = "dream" if "dream" in model_type else model_type
    shift = family in SHIFTED
    stored = json.loads(extra.read_text()) if (extra := Path(name) / "daca_adapter.json").exists() else {}
    shift = stored.get("shift_logits", shift)
    auto_map = getattr(config, "auto_map", None) or {}
    if native:
        model = native.from_pretrained(name, config=config, dtype=torch_dtype, **quant)
    else:
        if auto_map and not trust_remote_code:
            raise ValueError(f"{name} ships its own model code ({model_type}); pass model.trust_remote_code=true")
        key = "AutoModelForMaskedLM" if "AutoModelForMaskedLM" in auto_map else "AutoModel"
        if auto_map:
            from .archs.remote import fix_loaded

            model = _remote_class(config, name, key).from_pretrained(name, config=config, dtype=torch_dtype, **quant)
            fix_loaded(model)
        else:
            model = AutoModelForMaskedLM.from_pretrained(name, dtype=torch_dtype, **quant)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else _eos_id(tokenizer, config)
    return ModelAdapter(model, tokenizer, _mask_id(tokenizer, config), _eos_id(tokenizer, config), int(pad),
                        shift_logits=shift, source=name, square_mask=bool(auto_map) and family == "dream" and not native,
                        block_size=int(stored.get("block_size", 0)))


def require_available(cfg: ModelConfig, need_gpu: bool = False) -> None:
    """Fail fast, before any work, when a preset needs a GPU or weights this machine lacks."""
    import torch as _torch

    if need_gpu and not _torch.cuda.is_available():
        raise UnavailableError(f"this preset needs a CUDA GPU ({cfg.name}); none is visible here. "
                               "Run it on a GPU machine, or use configs/tiny.yaml on a CPU.")
    if cfg.name == "tiny" or Path(cfg.name).is_dir():
        return
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = isinstance(try_to_load_from_cache(cfg.name, "config.json"), str)
    except ValueError:  # not even a valid hub id: a folder path that does not exist
        raise UnavailableError(f"no such model folder {cfg.name}; check the path (model.name or train.init)"
                               f"{_how_to_make(cfg.name)}") from None
    if not cached:
        raise UnavailableError(f"weights for {cfg.name!r} are neither a local folder nor in the Hugging Face cache. "
                               f"Download them where the hub is reachable (`hf download {cfg.name}`) "
                               "or set model.name to a local save_pretrained folder.")


def _how_to_make(name: str) -> str:
    """How to make a missing folder that an SFT run writes (`OUTPUT/final`), for the error line."""
    path = Path(name)
    if path.name != "final":
        return ""
    shipped = {"runs/sft-tiny": "configs/tiny_sft.yaml"}.get(path.parent.as_posix())
    hint = f"daca-bench sft --config {shipped}" if shipped else f"daca-bench sft ... --output-dir {path.parent}"
    return f"; an SFT run writes it: {hint}"


def run_canvas(name: str) -> tuple[dict, Path] | None:
    """The canvas (gen_length, block_length, steps) a model was trained and checked with, read from
    the config.json of the run that wrote it (an SFT or RL run's `final/` or `checkpoint-STEP/`);
    None for tiny, hub ids and folders without one."""
    folder = Path(name)
    if name == "tiny" or not folder.is_dir():
        return None
    stored = folder.parent / "config.json"
    try:
        run = json.loads(stored.read_text())
    except (OSError, ValueError):
        return None
    section = run.get("eval") or run.get("sampler") if isinstance(run, dict) else None
    if not isinstance(section, dict) or not all(isinstance(section.get(k), int) for k in ("gen_length", "block_length", "steps")):
        return None
    return {k: section[k] for k in ("gen_length", "block_length", "steps")}, stored


def default_device() -> torch.device:
    """This process's CUDA device (LOCAL_RANK under torchrun) when there is one, else the CPU."""
    return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if torch.cuda.is_available() else torch.device("cpu")


def load_model(cfg: ModelConfig) -> ModelAdapter:
    if cfg.block_size < 0:  # the tiny model: a block model when > 0; a folder: its own block size (daca_adapter.json)
        raise ConfigError(f"model.block_size={cfg.block_size} must be 0 (full attention) or a block length")
    if cfg.name == "tiny":
        tok = build_char_tokenizer()
        model = build_tiny_model(cfg, tok).to(pick(DTYPES, cfg.dtype, "model.dtype"))
        return ModelAdapter(model, tok, tok.mask_token_id, tok.eos_token_id, tok.pad_token_id, source="tiny",
                            block_size=cfg.block_size)
    adapter = load_pretrained(cfg.name, cfg.trust_remote_code, cfg.dtype)
    if cfg.block_size and cfg.block_size != adapter.block_size:  # 0: the folder's own
        raise ConfigError(f"model.block_size={cfg.block_size}, but {cfg.name} has block size {adapter.block_size}")
    return adapter


def load_checkpoint(name: str, trust_remote_code: bool = False, dtype: str = "float32", base: str = "") -> ModelAdapter:
    """`load_model` plus LoRA adapter folders (adapter_config.json): the base model with the adapter merged in."""
    folder = Path(name)
    if not (folder / "adapter_config.json").exists():
        return load_model(ModelConfig(name=name, trust_remote_code=trust_remote_code, dtype=dtype))
    from peft import PeftModel

    base = base or json.loads((folder / "adapter_config.json").read_text()).get("base_model_name_or_path") or ""
    if not base:
        raise ValueError(f"{name} is a LoRA adapter that does not name its base model; pass the base (--base)")
    adapter = load_model(ModelConfig(name=base, trust_remote_code=trust_remote_code, dtype=dtype))
    model = PeftModel.from_pretrained(adapter.model, str(folder)).merge_and_unload()
    return ModelAdapter(model, adapter.tokenizer, adapter.mask_token_id, adapter.eos_token_id, adapter.pad_token_id,
                        adapter.shift_logits, source=name, block_size=adapter.block_size)


def count_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
