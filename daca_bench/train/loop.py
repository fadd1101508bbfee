"""The one run loop that RL (`trainer.train`) and SFT (`sft.train_sft`) share: the run folder every process
must see, a rerun refused under another config or resumed from the newest intact checkpoint, AdamW with
warmup and the data order (RunState), config.json, the metrics log (cut back on a resume), checkpoints every
`save_every` steps and on a stop signal, final/ and summary.json. The caller brings its model and its step.

    loop = Loop.open(cfg, "sft", out_dir, resume, RESUMABLE_SFT, par)  # loop.ckpt: None or where to resume
    run = loop.optimiser(adapter, adapter.model.parameters(), n_items=len(train))
    with loop.running("sft arithmetic"):
        stopped = loop.steps(batch_size, step, postfix)   # step(indices) -> its metrics row
        return stopped or loop.finish(summary, fresh=lambda: load_model(cfg.model))
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from ..engine.checkpoint import (
    RunState,
    is_sharded,
    load_sharded,
    resume_point,
    save_checkpoint,
    save_sharded,
    write_folder,
)
from ..engine.parallel import Parallel
from ..engine.runtime import is_main_thread
from ..engine.shards import stream_save
from ..errors import CheckpointError
from ..runfolder import refuse_changed
from .reporters import open_reporters


def as_held(model, live: bool):
    """final/'s model as the run holds it (SFT); `live`: the run's own model, not a fresh CPU copy."""
    return model


@dataclass
class Loop:
    par: Parallel
    out: Path
    section: str  # "train" (RL) or "sft": the config section `settings` is, named in messages
    settings: Any  # cfg.train / cfg.sft: steps, seed, threads, lr, weight_decay, warmup_steps, save_every, ...
    ckpt: Path | None  # the checkpoint this run resumes from (None: a new run)
    progress: bool = True
    sharded: bool = False  # checkpoints as DCP (every rank writes its shards), else save_pretrained folders
    frozen: bool = True  # DCP checkpoints hold the frozen weights too (False: LoRA's base stays train.init's)
    adapter: Any = None
    run: RunState | None = None
    start_step: int = 0
    saved_at: int | None = None
    stop: dict = field(default_factory=lambda: {"signal": None})
    log: Any = None
    board: Any = None
    bar: Any = None

    @classmethod
    def open(
        cls,
        cfg,
        section: str,
        out_dir,
        resume: bool,
        resumable,
        par: Parallel,
        progress: bool = True,
        sharded: bool = False,
        frozen: bool = True,
    ) -> Loop:
        """The run folder (rank 0 makes it; every process must see it), the thread count, a rerun under another
        config refused (nothing relabelled), and rank 0's resume point for every rank. `sharded`: DCP
        checkpoints at any number of processes (RL); else only under the engine (SFT)."""
        s = getattr(cfg, section)
        out = Path(out_dir)
        if par.rank == 0:
            out.mkdir(parents=True, exist_ok=True)
        par.check_shared(out)
        if s.threads:
            torch.set_num_threads(s.threads)
        if resume:  # a folder written under another config is never resumed, nor relabelled
            refuse_changed(out, cfg, resumable)
        ckpt = par.broadcast_object(resume_point(out, fresh=not resume) if par.rank == 0 else None)  # rank 0's view
        return cls(par, out, section, s, ckpt, progress, sharded or par.engine, frozen)

    @property
    def main(self) -> bool:
        return self.par.rank == 0

    def optimiser(self, adapter, params, n_items: int, betas=(0.9, 0.999)) -> RunState:
        """AdamW over `params` with linear warmup, the shuffled order of `n_items`, and on a resume the
        checkpoint's weights (DCP), optimizer, schedule, data position and RNG; the metrics log is cut
        back to the checkpoint's step (a new run starts without one, and without a summary)."""
        s, out = self.settings, self.out
        opt = torch.optim.AdamW(params, lr=s.lr, betas=betas, weight_decay=s.weight_decay)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: min(1.0, (k + 1) / max(1, s.warmup_steps)))
        self.adapter, self.run = adapter, RunState(opt, sched, n_items, s.seed)
        if self.ckpt:
            if is_sharded(self.ckpt):
                load_sharded(self.ckpt, adapter.model, opt, frozen=self.frozen)
            self.run.restore(self.ckpt)
            if self.run.step > s.steps:
                name, at = f"{self.section}.steps", self.run.step
                raise CheckpointError(
                    f"{out} is at step {at}, past {name}={s.steps}; set {name} to {at} or more, "
                    "or rerun with --fresh to start over"
                )
            if self.main:
                truncate_metrics(out / "metrics.jsonl", self.run.step)
            if self.progress and self.main:
                print(f"resuming {out} from {self.ckpt.name} (step {self.run.step} of {s.steps})", file=sys.stderr)
        elif self.main:
            (out / "metrics.jsonl").unlink(missing_ok=True)
            (out / "summary.json").unlink(missing_ok=True)
        self.start_step = self.run.step
        return self.run

    def write_config(self, record: dict) -> None:
        """config.json (rank 0), on a resume too: a changed step budget is what summary.json goes with."""
        if self.main:
            (self.out / "config.json").write_text(json.dumps(record, indent=2) + "\n")

    def advance(self) -> dict:
        """After a step's update: the schedule steps and the run counts the step; its `step` and `lr`."""
        self.run.scheduler.step()
        self.run.step += 1
        return {"step": self.run.step, "lr": self.run.scheduler.get_last_lr()[0]}

    def save(self) -> None:
        """A checkpoint of this step: DCP (every rank calls it) or a save_pretrained folder."""
        run, s = self.run, self.settings
        if self.sharded:
            save_sharded(
                self.out,
                self.adapter.model,
                run.optimizer,
                run.state_dict(optimizer=False),
                self.par,
                s.save_total_limit,
                frozen=self.frozen,
            )
        else:
            save_checkpoint(self.out, self.adapter, run.state_dict(), s.save_total_limit)
        self.saved_at = run.step

    @contextmanager
    def running(self, desc: str, report_to: str = "none", config: dict | None = None):
        """For the steps and the end of the run: SIGTERM / SIGINT noted (every rank listens: a preempted
        job's signal may reach any of them first), the progress bar, the metrics log and the reporters; on
        leaving, the process group is destroyed."""
        handlers = (
            {s: signal.signal(s, lambda num, _: self.stop.update(signal=num)) for s in (signal.SIGTERM, signal.SIGINT)}
            if is_main_thread()
            else {}
        )
        self.bar = tqdm(
            total=self.settings.steps,
            initial=self.run.step,
            desc=desc,
            unit="step",
            disable=not self.progress or not self.main,
        )
        self.log = open(self.out / "metrics.jsonl", "a") if self.main else None
        self.board = open_reporters(report_to, self.out, config or {}) if self.main else None
        try:
            yield self
        finally:
            self.bar.close()
            if self.log:
                self.log.close()
            if self.board:
                self.board.close()
            for s, h in handlers.items():
                signal.signal(s, h)
            self.par.close()  # destroy_process_group: the run's collectives are over

    def steps(
        self,
        batch_size: int,
        step: Callable[[list[int]], dict],
        postfix: Callable[[dict], dict],
        halt: Callable[[dict], dict | None] = lambda row: None,
        done: Callable[[], bool] = lambda: False,
    ):
        """`step(indices)` on the next batch until settings.steps (or `done()`, checked before each step);
        each row is logged (progress watchers read metrics.jsonl as it grows). `halt(row)` -> a summary
        stops the run there, checkpointed; so does a stop signal on any rank. Returns that summary, or None
        when the run reached its end, with a checkpoint of its last step."""
        run, s, par = self.run, self.settings, self.par
        while run.step < s.steps and not done():
            row = step(run.next_batch(batch_size))
            if self.log:
                self.log.write(json.dumps(row) + "\n")
                if self.board:
                    self.board.log(row, run.step)
                self.log.flush()
            self.bar.update(1)
            self.bar.set_postfix(**postfix(row))
            stopped = halt(row)
            if stopped is not None:
                self.save()
                return stopped
            signalled = par.any(self.stop["signal"] is not None)  # one rank's signal stops every rank at this step
            if run.step % s.save_every == 0 or signalled or done():
                self.save()
            if signalled:
                if self.main:
                    print(
                        f"stopped by signal {self.stop['signal'] or 'on another process'} at step {run.step}; "
                        "checkpoint saved, rerun to resume",
                        file=sys.stderr,
                    )
                return {"stopped": True, "step": run.step}
        if self.saved_at != run.step:
            self.save()
        if run.step < s.steps:  # stopped early: the bar ends where the run did, not at a time left for steps never run
            self.bar.total = run.step
            self.bar.refresh()
        return None

    def finish(self, summary: dict, fresh: Callable[[], Any], export: Callable = as_held, stream=None) -> dict:
        """final/ and summary.json (rank 0, atomically); every rank calls it and gets the summary. `stream`: the
        dtype final/ holds, where `export` is no more than that cast (write_final streams it under the engine)."""
        write_final(self.out / "final", self.adapter, self.par, fresh, export, stream)
        if self.main:
            tmp = self.out / "summary.json.tmp"
            tmp.write_text(json.dumps(summary, indent=2) + "\n")
            os.replace(tmp, self.out / "summary.json")
        return summary


def write_final(
    path: Path, adapter, par: Parallel, fresh: Callable[[], Any], export: Callable = as_held, stream=None
) -> None:
    """final/: a plain save_pretrained folder of `export(model, live)`. Under the engine with `stream` (a dtype: a
    full fine-tune) the weights are gathered one by one and written file by file in that dtype (engine/shards.py:
    no whole copy on any host); else every rank hands its shards over and rank 0 loads them into `fresh()`, a CPU
    copy of the model (LoRA merges into it; remote-code models copy their code beside it)."""
    if par.engine and stream is not None and not getattr(adapter.model.config, "auto_map", None):
        stream_save(path, adapter, par, stream)
        return
    if par.engine:
        full = par.full_state(adapter.model)
        if par.rank == 0:
            copy = fresh()
            copy.model.load_state_dict(full)
            write_folder(path, replace(copy, model=export(copy.model, False)).save)
        par.barrier()
        return
    write_folder(path, replace(adapter, model=export(adapter.model, True)).save)


def truncate_metrics(path: Path, step: int) -> None:
    """Drop metric lines past the checkpoint a run resumes from, so no step is logged twice."""
    if path.exists():
        keep = [line for line in path.read_text().splitlines() if line and json.loads(line)["step"] <= step]
        path.write_text("".join(line + "\n" for line in keep))
