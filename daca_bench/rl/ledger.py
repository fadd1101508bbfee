"""The compute ledger of a run: per phase (rollout, likelihood_old: old and reference passes,
likelihood: the update's forward and backward, eval), the FLOPs counted by PyTorch's own
`torch.utils.flop_counter.FlopCounterMode`, the canvases and tokens the model processed, its
forward calls and the wall-clock; the trainer adds prompts, completions and reward calls.

    ledger = Ledger(adapter.model)
    with ledger("rollout"): sample(...)            # every forward of the model is booked to "rollout"
    with ledger("likelihood"), ledger.backward(): loss.backward()

A forward call's FLOPs depend only on the shapes it is given (ids, masks, the KV cache's window),
so the first call of each shape is counted under FlopCounterMode and every later one of the same
shape reuses that count: exact, and the counter slows a handful of calls, not the run. A
backward is counted the same way, keyed by the shapes of the forward calls it goes back through.
A canvas is one row of one forward call: K SML strata of N rows in one call are K*N canvases,
and every inner update's passes are counted (the old `passes_*` counter booked module calls).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

COLUMNS = ("flops_forward", "flops_backward", "canvases", "tokens", "calls", "seconds")


def _cpu_attention(query_shape, key_shape, value_shape, *_, out_shape=None, **__) -> int:
    from torch.utils.flop_counter import sdpa_flop_count

    return sdpa_flop_count(query_shape, key_shape, value_shape)


def _cpu_attention_backward(grad_out_shape, query_shape, key_shape, value_shape, *_, out_shape=None, **__) -> int:
    from torch.utils.flop_counter import sdpa_backward_flop_count

    return sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape)


def flop_counter() -> FlopCounterMode:
    """PyTorch's FLOP counter, taught the CPU's fused attention kernel (counted with the library's own
    attention formula; the library counts the GPU's flash / efficient kernels and the math path, not
    this one, so on a CPU the attention FLOPs would otherwise be missing)."""
    aten = torch.ops.aten
    extra = {}
    if hasattr(aten, "_scaled_dot_product_flash_attention_for_cpu"):
        extra[aten._scaled_dot_product_flash_attention_for_cpu] = _cpu_attention
        extra[aten._scaled_dot_product_flash_attention_for_cpu_backward] = _cpu_attention_backward
    return FlopCounterMode(display=False, custom_mapping=extra)


def _shapes(value) -> tuple:
    """The shapes of the tensors in a call's arguments (and a KV cache's window): the key of its cost."""
    if isinstance(value, torch.Tensor):
        return (tuple(value.shape),)
    if isinstance(value, (list, tuple)):
        return tuple(s for v in value for s in _shapes(v))
    if isinstance(value, dict):
        return tuple(s for k in sorted(value) for s in ((k,), *_shapes(value[k])))
    window = getattr(value, "window", None)
    return (("window", window, len(getattr(value, "keys", ()) or ())),) if hasattr(value, "window") else ()


class Ledger:
    def __init__(self, model: torch.nn.Module):
        self.phase = "other"
        self.book: dict[str, Counter] = {}
        self._fwd: dict[tuple, float] = {}  # (shapes, grad) -> forward FLOPs
        self._bwd: dict[tuple, float] = {}  # the forward shapes a backward goes through -> backward FLOPs
        self._pending: list[tuple] = []  # shapes of the grad-enabled forwards since the last backward
        self._counter: FlopCounterMode | None = None
        self._key = None
        self.watch(model)

    def watch(self, model: torch.nn.Module) -> None:
        """Book this model's forwards too (a full fine-tune's separate reference model)."""
        model.register_forward_pre_hook(self._before, with_kwargs=True)
        model.register_forward_hook(self._after, with_kwargs=True)

    # the model's hooks
    def _before(self, _module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        grad = torch.is_grad_enabled()
        key = (_shapes(args), _shapes(kwargs), grad)
        entry = self.book.setdefault(self.phase, Counter())
        entry["calls"] += 1
        if isinstance(ids, torch.Tensor) and ids.dim() == 2:
            entry["canvases"] += ids.shape[0]
            entry["tokens"] += ids.numel()
        if grad:
            self._pending.append(key)
        if key in self._fwd or self._counter is not None:
            entry["flops_forward"] += self._fwd.get(key, 0.0)
            return
        self._key, self._counter = key, flop_counter()
        self._counter.__enter__()

    def _after(self, _module, _args, _kwargs, _output):
        if self._counter is None or self._key is None:
            return
        self._counter.__exit__(None, None, None)
        flops = float(self._counter.get_total_flops())
        self._fwd[self._key] = flops
        self.book.setdefault(self.phase, Counter())["flops_forward"] += flops
        self._counter, self._key = None, None

    @contextmanager
    def __call__(self, phase: str):
        """Book the forwards (and time) inside to `phase`."""
        prev, self.phase = self.phase, phase
        tick = time.perf_counter()
        try:
            yield
        finally:
            self.book.setdefault(phase, Counter())["seconds"] += time.perf_counter() - tick
            self.phase = prev

    @contextmanager
    def backward(self):
        """Around a `.backward()`: its FLOPs, counted once per set of forward shapes it goes through."""
        key, self._pending = tuple(self._pending), []
        entry = self.book.setdefault(self.phase, Counter())
        if key in self._bwd:
            entry["flops_backward"] += self._bwd[key]
            yield
            return
        with flop_counter() as counter:
            yield
        self._bwd[key] = float(counter.get_total_flops())
        entry["flops_backward"] += self._bwd[key]

    @property
    def counts(self) -> Counter:
        """Forward calls per phase (what the earlier pass counter booked; benchmarks read it)."""
        return Counter({p: v["calls"] for p, v in self.book.items() if v["calls"]})

    def booked(self, before: dict[str, Counter], phases, par=None) -> dict:
        """Since `before`, per phase: `passes_P` (canvases), `tokens_P` and `flops_P` (forward + backward),
        summed over every process (par: engine/parallel.py), the step's columns of metrics.jsonl."""
        new = self.since(before)
        cols = [(p, c) for p in phases for c in ("canvases", "tokens", "flops_forward", "flops_backward")]
        vec = torch.tensor([float(new.get(p, Counter())[c]) for p, c in cols], dtype=torch.float64)
        got = dict(zip(cols, (par.all_sum(vec) if par is not None else vec).tolist()))
        out = {}
        for p in phases:
            if got[(p, "canvases")]:
                out.update(
                    {
                        f"passes_{p}": int(got[(p, "canvases")]),
                        f"tokens_{p}": int(got[(p, "tokens")]),
                        f"flops_{p}": got[(p, "flops_forward")] + got[(p, "flops_backward")],
                    }
                )
        return out

    def snapshot(self) -> dict[str, Counter]:
        return {k: Counter(v) for k, v in self.book.items()}

    def since(self, before: dict[str, Counter]) -> dict[str, Counter]:
        """What was booked after `before` (a snapshot), per phase."""
        return {k: v - before.get(k, Counter()) for k, v in self.book.items() if v - before.get(k, Counter())}

    def totals(self) -> dict[str, dict]:
        """Per phase, every column (seconds rounded), for summary.json."""
        return {
            p: {c: (round(v[c], 3) if c == "seconds" else v[c]) for c in COLUMNS} for p, v in sorted(self.book.items())
        }


PHASES = ("rollout", "likelihood_old", "likelihood")  # a training step's phases in the ledger


def read_rows(path: Path) -> list[dict]:
    """metrics.jsonl's rows."""
    return [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]


def run_ledger(
    path: Path | list[dict], final_eval: dict | None = None, n_eval: int = 0, upto: int | None = None
) -> dict:
    """The run's compute ledger, for summary.json: per phase the FLOPs, canvases (passes: every SML
    stratum and inner update), tokens and seconds summed over the steps in metrics.jsonl (so a resumed
    run counts every step once), plus the final evaluation's; and the samples: prompts, completions,
    reward calls. With `upto`, the ledger of the run's first `upto` steps (a budget's arm, evaluated
    there: its intermediate evaluations before it count, the one at `upto` is its final). PATH: the
    metrics.jsonl, or its rows already read."""
    rows = [
        r for r in (path if isinstance(path, list) else read_rows(path)) if upto is None or r.get("step", 0) <= upto
    ]
    if upto is not None:  # the evaluation at `upto` is that budget's final one
        final_eval = {k: v for k, v in rows[-1].items() if k.endswith("_eval")} if rows else {}
        n_eval = rows[-1].get("eval_prompts", 0) if rows else 0
        rows = rows[:-1] + [{k: v for k, v in rows[-1].items() if not k.endswith("_eval") and k != "eval_prompts"}]
    final_eval = final_eval or {}
    total = lambda key: sum(r.get(key, 0) or 0 for r in rows)  # noqa: E731
    phases = {}
    for p in (*PHASES, "eval"):
        late = final_eval if p == "eval" else {}
        phases[p] = {
            "flops": total(f"flops_{p}") + late.get(f"flops_{p}", 0),
            "passes": total(f"passes_{p}") + late.get(f"passes_{p}", 0),
            "tokens": total(f"tokens_{p}") + late.get(f"tokens_{p}", 0),
            "seconds": round(total(f"seconds_{'update' if p == 'likelihood' else p}"), 3),
        }
    return {
        "phases": phases,
        "flops_train": sum(phases[p]["flops"] for p in PHASES),
        "prompts": total("prompts"),
        "completions": total("completions"),
        "reward_calls": total("reward_calls") + total("eval_prompts") + n_eval,
        **({"steps": rows[-1].get("step", 0) if rows else 0} if upto is not None else {}),
    }
