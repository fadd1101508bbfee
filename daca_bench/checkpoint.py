"""Atomic, resumable checkpoints: the model folder (save_pretrained) plus a state file with
the optimizer, scheduler, every RNG, the step and the data position.

A checkpoint is written to `<dir>.tmp` and swapped in with renames, so a crash mid-write
leaves the previous checkpoint intact.
"""
from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import numpy as np
import torch


def rng_state() -> dict:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(path: Path, adapter, state: dict) -> None:
    path = Path(path)
    tmp, old = path.with_name(path.name + ".tmp"), path.with_name(path.name + ".old")
    shutil.rmtree(tmp, ignore_errors=True)
    adapter.save(tmp)
    torch.save({**state, "rng": rng_state()}, tmp / "trainer_state.pt")
    if path.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.replace(path, old)
    os.replace(tmp, path)
    shutil.rmtree(old, ignore_errors=True)


def find_checkpoint(path: Path) -> Path | None:
    """The newest complete checkpoint: `path`, or `path.old` when a swap was interrupted."""
    path = Path(path)
    for cand in (path, path.with_name(path.name + ".old")):
        if (cand / "trainer_state.pt").exists():
            return cand
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
        idx = self.order[self.pos: self.pos + size].tolist()
        self.pos += size
        return idx

    def state_dict(self) -> dict:
        return {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                "generator": self.generator.get_state(), "step": self.step, "order": self.order, "pos": self.pos,
                "extra": self.extra}

    def restore(self, ckpt: Path) -> None:
        """Load the checkpoint's state (and every RNG) into this run."""
        state = load_state(ckpt)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.generator.set_state(state["generator"])
        self.step, self.order, self.pos = state["step"], state["order"], state["pos"]
        self.extra = state.get("extra", {})
