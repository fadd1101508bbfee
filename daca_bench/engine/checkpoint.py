"""Resumable checkpoints that can be trusted: `RUN/checkpoint-<step>/` folders (the model
folder from save_pretrained, a state file with the optimizer, scheduler, every RNG, the step
and the data position, and a manifest of the files and their sizes). The RL trainer's hold
`dcp/` instead of the model folder: model and optimizer as a torch.distributed.checkpoint
(DCP), written by every rank in parallel and loadable at any number of processes.

    save_checkpoint(run_dir, adapter, state, limit=2)  # atomic; keeps the newest `limit`
    save_sharded(run_dir, model, opt, state, par)      # the same, DCP, every rank calls it
    ckpt = resume_point(run_dir)                       # newest intact one, None for a new run

Each checkpoint is written to a hidden temporary folder and renamed into place, so a crash or
a full disk mid-write leaves the previous ones intact (a full disk is one DiskFullError line).
On resume the newest is checked (every file present with its size, weights, state and JSON
loadable, the step matching its name); a damaged one is reported in one line and the newest
intact one is used. A run folder that holds a run but no intact checkpoint is never started
over silently: that needs `fresh=True` (`--fresh`). An older single `checkpoint/` folder is
still found.
"""

from __future__ import annotations

import errno
import json
import os
import random
import re
import shutil
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from ..errors import CheckpointError, DiskFullError
from .parallel import Parallel

PREFIX = "checkpoint-"
MANIFEST = "manifest.json"
RUN_FILES = ("config.json", "metrics.jsonl", "summary.json")  # a folder holding any of these holds a run


def rng_state() -> dict:
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _disk_full(exc: BaseException, folder: Path, needed: int) -> bool:
    """A save failure caused by a full disk: ENOSPC anywhere in the chain, or too little space left
    (torch and safetensors report it as an iostream or serialization error)."""
    for seen in _chain(exc):
        if isinstance(seen, OSError) and seen.errno == errno.ENOSPC:
            return True
        if any(s in str(seen) for s in ("No space left", "StorageFull", "os error 28", "unexpected pos")):
            return True  # "unexpected pos": torch's zip writer, its write cut short
    try:
        return shutil.disk_usage(folder).free < max(needed, 1 << 20)
    except OSError:
        return False


def _chain(exc: BaseException | None) -> list[BaseException]:
    """The error and its causes, outermost first; DCP's CheckpointException (a BaseException) opened up
    into each rank's own error."""
    out = []
    while exc is not None and exc not in out:
        out.append(exc)
        for wrapped in getattr(exc, "failures", {}).values():  # {rank: (exception, traceback summary)}
            out.extend(_chain(wrapped[0] if isinstance(wrapped, tuple) else wrapped))
        exc = exc.__cause__ or exc.__context__
    return out


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _mb(n: int) -> str:
    return f"{n / 2**20:.0f} MB" if n >= 2**20 else f"{n / 2**10:.0f} KB"


def checkpoints(run_dir: Path) -> list[Path]:
    """The run's checkpoint folders, newest first (an older single `checkpoint/` last)."""
    run_dir = Path(run_dir)
    found = [p for p in run_dir.glob(PREFIX + "*") if p.is_dir() and re.fullmatch(PREFIX + r"\d+", p.name)]
    found.sort(key=lambda p: int(p.name[len(PREFIX) :]), reverse=True)
    return found + [p for p in (run_dir / "checkpoint", run_dir / "checkpoint.old") if p.is_dir()]


def write_folder(path: Path, write, needed: int = 0) -> Path:
    """Build a folder with `write(tmp)` in a hidden temporary sibling and rename it into place
    (replacing an older one). On failure the temporary folder is removed; a full disk is a
    DiskFullError naming the folder and about how much space (`needed`, else what was written)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        write(tmp)
    except Exception as exc:
        written = _size(tmp) if tmp.exists() else 0
        shutil.rmtree(tmp, ignore_errors=True)
        needed = needed or written
        if _disk_full(exc, path.parent, needed):
            raise DiskFullError(f"disk full while saving {path}: about {_mb(needed)} needed in {path.parent}") from exc
        raise
    return _publish(tmp, path)


def _publish(tmp: Path, path: Path) -> Path:
    """Rename a finished temporary folder into place, replacing an older `path`."""
    old = path.with_name(f".{path.name}.old")
    if path.exists():  # saved again (say, the same step at the end and on a stop signal)
        shutil.rmtree(old, ignore_errors=True)
        os.replace(path, old)
    os.replace(tmp, path)
    shutil.rmtree(old, ignore_errors=True)
    return path


def _manifest(folder: Path, step: int) -> None:
    sizes = {f.relative_to(folder).as_posix(): f.stat().st_size for f in sorted(folder.rglob("*")) if f.is_file()}
    (folder / MANIFEST).write_text(json.dumps({"step": step, "files": sizes}, indent=1) + "\n")


def save_checkpoint(run_dir: Path, adapter, state: dict, limit: int = 2) -> Path:
    """Write RUN/checkpoint-<step>/ atomically, then keep only the newest `limit` (at least one)."""
    run_dir = Path(run_dir)
    for stale in run_dir.glob(f".{PREFIX}*.tmp"):  # left by a crash mid-save
        shutil.rmtree(stale, ignore_errors=True)
    previous = checkpoints(run_dir)

    def write(tmp: Path) -> None:
        adapter.save(tmp)
        torch.save({**state, "rng": rng_state()}, tmp / "trainer_state.pt")
        _manifest(tmp, state["step"])

    try:
        path = write_folder(run_dir / f"{PREFIX}{state['step']}", write, _size(previous[0]) if previous else 0)
    except DiskFullError as exc:
        kept = f"; {previous[0].name} is intact" if previous else ""
        raise DiskFullError(f"{exc}{kept}; free some space and rerun the same command to resume") from exc.__cause__
    for extra in checkpoints(run_dir)[max(1, limit) :]:
        shutil.rmtree(extra, ignore_errors=True)
    return path


@contextmanager
def _one_process_quiet():
    """DCP warns that it assumes one process when there is no process group: that is meant here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        yield


def _state_options(frozen: bool):
    """Frozen weights in or out (LoRA). Loading without them is not strict about them: dcp.load itself
    fails on any trainable weight the checkpoint lacks."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(ignore_frozen_params=not frozen, strict=frozen)


def save_sharded(
    run_dir: Path, model, optimizer, state: dict, par: Parallel, limit: int = 2, frozen: bool = True
) -> Path:
    """RUN/checkpoint-<step>/ with `dcp/` (model and optimizer, each rank writing its shards) and rank 0's
    trainer_state.pt (scheduler, data order and position, generator, RNG) and manifest; written to a
    temporary folder and renamed into place, as save_checkpoint. Every rank calls it; a failure on any
    rank leaves the previous checkpoints intact and raises one line on every rank naming the folder, the
    rank and the cause (`_save_failed`: a full disk's partial folder removed, any other set aside). `frozen=False` leaves frozen
    weights out (LoRA: the base is train.init's)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException  # a BaseException, not an Exception
    from torch.distributed.checkpoint.state_dict import get_state_dict

    run_dir = Path(run_dir)
    path = run_dir / f"{PREFIX}{state['step']}"
    tmp = path.with_name(f".{path.name}.tmp")
    previous = checkpoints(run_dir)
    failure = None
    if par.rank == 0:
        try:
            for stale in [*run_dir.glob(f".{PREFIX}*.tmp"), *run_dir.glob(f".{PREFIX}*.failed")]:  # earlier failures
                shutil.rmtree(stale, ignore_errors=True)
            tmp.mkdir(parents=True)
        except Exception as exc:  # noqa: BLE001 - reported on every rank below, not only here
            failure = exc
    if not par.any(failure is not None):  # every rank writes, or none (DCP's save is collective)
        try:
            model_sd, optim_sd = get_state_dict(model, optimizer, options=_state_options(frozen))
            with _one_process_quiet():
                dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=str(tmp / "dcp"))
            if par.rank == 0:
                torch.save({**state, "rng": rng_state()}, tmp / "trainer_state.pt")
                _manifest(tmp, state["step"])
        except (Exception, CheckpointException) as exc:  # noqa: BLE001 - every rank learns of it before any raises
            failure = exc
    causes = par.gather_objects(None if failure is None else _cause(failure, run_dir, previous))
    if any(causes):
        raise _save_failed(path, tmp, previous, causes, par.rank) from failure
    if par.rank == 0:
        _publish(tmp, path)
        for extra in checkpoints(run_dir)[max(1, limit) :]:
            shutil.rmtree(extra, ignore_errors=True)
    par.barrier()
    return path


def _cause(exc: BaseException, folder: Path, previous: list[Path]) -> tuple[bool, str]:
    """(disk full?, the cause in a few words) of a failed save: the first line of the deepest error."""
    full = _disk_full(exc, folder, _size(previous[0]) if previous else 0)
    chain = _chain(exc)
    root = next((e for e in chain if isinstance(e, OSError) and e.strerror), chain[-1])  # an OSError says it best
    text = (str(root).strip().splitlines() or [type(root).__name__])[0][:160]
    return full, f"{type(root).__name__}: {text}"


def _save_failed(path: Path, tmp: Path, previous: list[Path], causes: list, rank: int) -> Exception:
    """The one-line error of a failed sharded save, the same on every rank. A full disk: the partial folder is
    removed (its space is what is missing); any other cause: it is set aside as `.checkpoint-STEP.failed`."""
    first = next(r for r, c in enumerate(causes) if c)
    full, cause = causes[first]
    where = f" on rank {first}" if len(causes) > 1 else ""
    kept = f"; {previous[0].name} is intact" if previous else ""
    aside = tmp.with_name(f".{path.name}.failed")
    if rank == 0 and tmp.exists():
        try:
            shutil.rmtree(tmp) if full else os.replace(tmp, aside)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    if full:
        return DiskFullError(
            f"disk full while saving {path} ({cause}{where}); the partial folder was removed{kept}; "
            "free some space and rerun the same command to resume"
        )
    return CheckpointError(
        f"saving {path} failed ({cause}{where}); the partial folder is set aside as {aside}{kept}; "
        "fix the cause and rerun the same command to resume"
    )


def is_sharded(ckpt: Path | None) -> bool:
    return ckpt is not None and (Path(ckpt) / "dcp").is_dir()


def load_sharded(ckpt: Path, model, optimizer=None, frozen: bool = True) -> None:
    """Model (and optimizer) from a checkpoint's `dcp/`, into this run's model (sharded or not, at any
    number of processes: DCP reshards on load); the weights take the model's dtype."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (
        get_model_state_dict,
        get_state_dict,
        set_model_state_dict,
        set_state_dict,
    )

    options = _state_options(frozen)
    if optimizer is None:
        both = {"model": get_model_state_dict(model, options=options)}
    else:
        model_sd, optim_sd = get_state_dict(model, optimizer, options=options)
        both = {"model": model_sd, "optim": optim_sd}
    with _one_process_quiet():
        dcp.load(both, checkpoint_id=str(Path(ckpt) / "dcp"))
    if optimizer is None:
        set_model_state_dict(model, both["model"], options=options)
    else:
        set_state_dict(
            model, optimizer, model_state_dict=both["model"], optim_state_dict=both["optim"], options=options
        )


def damage(path: Path) -> str | None:
    """Why the checkpoint cannot be resumed from, or None when it is intact."""
    path = Path(path)
    manifest = path / MANIFEST
    try:
        if manifest.exists():
            meta = json.loads(manifest.read_text())
            for name, size in meta["files"].items():
                if not (path / name).is_file():
                    return f"{name} is missing"
                if (path / name).stat().st_size != size:
                    return f"{name} has {(path / name).stat().st_size} bytes, not {size}"
        if not (path / "trainer_state.pt").is_file():
            return "trainer_state.pt is missing"
        if is_sharded(path):
            if not (path / "dcp" / ".metadata").is_file():
                return "dcp/.metadata is missing"
            from torch.distributed.checkpoint import FileSystemReader

            FileSystemReader(str(path / "dcp")).read_metadata()
        weights = [] if is_sharded(path) else sorted(path.glob("*.safetensors"))
        if not weights and not is_sharded(path):
            return "no weights (*.safetensors)"
        if weights and not (path / "config.json").is_file() and not (path / "adapter_config.json").is_file():
            return "config.json is missing"
        for f in sorted(path.glob("*.json")):
            json.loads(f.read_text())
        from safetensors import safe_open

        for f in weights:
            with safe_open(str(f), "pt") as handle:
                list(handle.keys())
        state = torch.load(path / "trainer_state.pt", weights_only=False, mmap=True)
    except Exception as exc:  # noqa: BLE001 - any failure to read it is damage, named by its first line
        where = getattr(exc, "filename", None) or ""
        first = (str(exc).strip().splitlines() or [""])[0][:160]
        return f"unreadable ({type(exc).__name__}{': ' + first if first else ''}{' in ' + where if where else ''})"
    if not isinstance(state, dict) or "step" not in state:
        return "trainer_state.pt holds no step"
    if path.name.startswith(PREFIX) and state["step"] != int(path.name[len(PREFIX) :]):
        return f"trainer_state.pt is for step {state['step']}"
    return None


def find_checkpoint(run_dir: Path, report=None) -> Path | None:
    """The newest intact checkpoint of the run (None when there is none); each damaged newer
    one is passed to `report` as a one-line message."""
    for cand in checkpoints(run_dir):
        why = damage(cand)
        if why is None:
            return cand
        if report:
            report(f"checkpoint {cand} is damaged: {why}")
    return None


def holds_run(run_dir: Path) -> bool:
    """Whether the folder already holds a run (its config, metrics, summary or checkpoints)."""
    run_dir = Path(run_dir)
    return any((run_dir / f).exists() for f in RUN_FILES) or bool(checkpoints(run_dir))


def resume_point(run_dir: Path, fresh: bool = False) -> Path | None:
    """The checkpoint to resume from, or None to start a new run. A damaged newest checkpoint is
    reported in one line on stderr; a run folder with a run but no intact checkpoint is a
    CheckpointError unless `fresh`."""
    if fresh:
        return None
    damaged = []
    ckpt = find_checkpoint(run_dir, damaged.append)
    if ckpt is not None:
        if damaged:
            more = f" (and {len(damaged) - 1} more damaged)" if len(damaged) > 1 else ""
            print(f"{damaged[0]}{more}; resuming from {ckpt.name}", file=sys.stderr)
        return ckpt
    if damaged:
        raise CheckpointError(
            f"no intact checkpoint in {run_dir} ({damaged[0].removeprefix('checkpoint ')}"
            f"{f' and {len(damaged) - 1} more' if len(damaged) > 1 else ''}); "
            "rerun with --fresh to start the run over"
        )
    if holds_run(run_dir):
        present = ", ".join(f for f in RUN_FILES if (Path(run_dir) / f).exists())
        raise CheckpointError(
            f"{run_dir} already holds a run ({present}) but no checkpoint to resume from; rerun with --fresh to start it over, or choose "
            "another --output-dir"
        )
    return None


def load_state(path: Path) -> dict:
    state = torch.load(Path(path) / "trainer_state.pt", weights_only=False)
    set_rng_state(state.pop("rng"))
    return state


class RunState:
    """What a resumable loop carries besides the model: optimizer, scheduler, the data
    generator, the step and the position in the shuffled data (reshuffled every epoch)."""

    def __init__(self, optimizer, scheduler, n_items: int, seed: int):
        self.optimizer, self.scheduler, self.n_items = optimizer, scheduler, n_items
        self.generator = torch.Generator().manual_seed(seed)
        self.step, self.order, self.pos = 0, torch.randperm(n_items, generator=self.generator), 0
        self.extra: dict = {}  # small loop-specific facts that must survive a resume (e.g. an early stop)

    def next_batch(self, size: int) -> list[int]:
        if self.pos + size > len(self.order):
            self.order, self.pos = torch.randperm(self.n_items, generator=self.generator), 0
        idx = self.order[self.pos : self.pos + size].tolist()
        self.pos += size
        return idx

    def state_dict(self, optimizer: bool = True) -> dict:
        """What trainer_state.pt holds (the optimizer too, unless a DCP checkpoint holds it)."""
        return {
            **({"optimizer": self.optimizer.state_dict()} if optimizer else {}),
            "scheduler": self.scheduler.state_dict(),
            "generator": self.generator.get_state(),
            "step": self.step,
            "order": self.order,
            "pos": self.pos,
            "extra": self.extra,
        }

    def restore(self, ckpt: Path) -> None:
        """Load the checkpoint's state (and every RNG) into this run."""
        state = load_state(ckpt)
        if "optimizer" in state:  # else in the checkpoint's dcp/ (load_sharded)
            self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.generator.set_state(state["generator"])
        self.step, self.order, self.pos = state["step"], state["order"], state["pos"]
        self.extra = state.get("extra", {})
