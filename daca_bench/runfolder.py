"""A run folder holds one run: a rerun under another config never resumes it or relabels it.

    refuse_changed(out, cfg, RESUMABLE_RL)   # before resuming: CheckpointError naming the changed keys
    aside = set_aside(out)                   # `--fresh`: the earlier run moves to OUT/.stale/N/

A rerun may change only the keys that change no number of the run (threads, batch sizes that
only split work, checkpoint cadence, reporting) and the step budget (to extend a run); any
other key differing from the folder's config.json is refused in one line that names the keys
and `--fresh`. `--fresh` sets the earlier run aside instead of deleting it, as `ablate` does
with a changed cell.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .errors import CheckpointError

STALE = ".stale"
# keys a rerun may change and still resume: none of them changes a number the run reports
_COMMON = ("output_dir", "model.trust_remote_code")
RESUMABLE_RL = (
    *_COMMON,
    "train.steps",
    "train.threads",
    "train.report_to",
    "train.save_every",
    "train.save_total_limit",
    "train.require_gpu",
    "train.gradient_checkpointing",
    "train.parallel",
    "train.offload",
    "rollout.batch_size",
    "eval.batch_size",
    "sml.chunk",
    "sml.logit_chunk",
)
RESUMABLE_SFT = (
    *_COMMON,
    "sft.steps",
    "sft.threads",
    "sft.parallel",
    "sft.offload",
    "sft.save_every",
    "sft.save_total_limit",
    "sampler.batch_size",
)


def flat(d: dict, prefix: str = "") -> dict:
    """{"a": {"b": 1}} -> {"a.b": 1}."""
    out = {}
    for k, v in d.items():
        out.update(flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {prefix + k: v})
    return out


def _plain(cfg) -> dict:
    from .config import to_dict

    return flat(json.loads(json.dumps(to_dict(cfg))))  # tuples as lists, as config.json holds them


def changes(stored: dict, cfg, resumable=()) -> list[tuple[str, object, object]]:
    """(key, stored value, new value) for each key of `cfg` that differs from the stored config,
    in key order. A key the stored config lacks (added to the package since) differs only when the
    new value is not its default; keys in `resumable` and the stored extras (git, versions) are ignored."""
    old, new, default = flat(stored), _plain(cfg), _plain(type(cfg)())
    out = []
    for key, value in new.items():
        if key in resumable:
            continue
        before = old[key] if key in old else default.get(key)
        if before != value:
            out.append((key, before, value))
    return out


def refuse_changed(folder: str | Path, cfg, resumable=()) -> None:
    """A CheckpointError when `folder`'s config.json was written under another config."""
    stored = Path(folder) / "config.json"
    if not stored.is_file():
        return
    try:
        data = json.loads(stored.read_text())
    except ValueError:
        raise CheckpointError(
            f"{stored} is not valid JSON; rerun with --fresh to set the run in {folder} aside and start over"
        ) from None
    diff = changes(data, cfg, resumable)
    if not diff:
        return
    shown = ", ".join(f"{k}: {old!r} -> {new!r}" for k, old, new in diff[:6])
    more = f" and {len(diff) - 6} more" if len(diff) > 6 else ""
    raise CheckpointError(
        f"{folder} holds a run with another config ({shown}{more}); rerun with --fresh to set "
        f"that run aside in {Path(folder) / STALE}/ and start over, or choose another --output-dir"
    )


def set_aside(folder: str | Path, keep=(".lock",)) -> Path | None:
    """Move everything in `folder` (but `keep` and earlier set-aside runs) into FOLDER/.stale/N/,
    N one past the last; returns that path, or None when there was nothing to move."""
    folder = Path(folder)
    items = [p for p in folder.iterdir() if p.name not in (STALE, *keep)] if folder.is_dir() else []
    if not items:
        return None
    earlier = [int(p.name) for p in (folder / STALE).glob("*") if p.name.isdigit()] if (folder / STALE).is_dir() else []
    aside = folder / STALE / str(max(earlier, default=-1) + 1)
    aside.mkdir(parents=True)
    for item in items:
        os.replace(item, aside / item.name)
    return aside
