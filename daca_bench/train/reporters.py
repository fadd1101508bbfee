"""Metric reporters for `train.report_to`: `none`, one name, or a comma-separated list
(`tensorboard,wandb`, as TRL's `report_to`). Each reporter is a function
`(run folder, config dict) -> Reporter` and an entry in REPORTERS; its package is imported
only when it is asked for.

    reporter = open_reporters("tensorboard,wandb", Path("runs/x"), to_dict(cfg))
    reporter.log({"loss": 0.1, "reward": 0.5}, step=1)
    reporter.close()

tensorboard writes under OUTPUT/tensorboard; wandb under OUTPUT/wandb (project from
WANDB_PROJECT, default daca-bench; WANDB_MODE=offline keeps the run on disk for `wandb sync`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..config import pick


@dataclass(frozen=True)
class Reporter:
    log: Callable[[dict, int], None]  # (metrics, step)
    close: Callable[[], None]


def scalars(metrics: dict) -> dict:
    """The numeric metrics of a row, without the step itself."""
    return {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and k != "step"}


def _needs(package: str, name: str):
    return RuntimeError(f"train.report_to={name} needs the {package} package: pip install 'daca-bench[{name}]'")


def _tensorboard(out: Path, config: dict) -> Reporter:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as exc:
        raise _needs("tensorboard", "tensorboard") from exc
    writer = SummaryWriter(str(out / "tensorboard"))

    def log(metrics: dict, step: int) -> None:
        for k, v in scalars(metrics).items():
            writer.add_scalar(k, v, step)

    return Reporter(log, writer.close)


def _wandb(out: Path, config: dict) -> Reporter:
    try:
        import wandb
    except ImportError as exc:
        raise _needs("wandb", "wandb") from exc
    out.mkdir(parents=True, exist_ok=True)
    run = wandb.init(project=os.environ.get("WANDB_PROJECT", "daca-bench"), name=out.name, dir=str(out), config=config)
    return Reporter(lambda metrics, step: run.log(scalars(metrics), step=step), run.finish)


REPORTERS = {"tensorboard": _tensorboard, "wandb": _wandb}


def reporter_names(report_to: str) -> list[str]:
    """`none` -> []; `tensorboard,wandb` -> both; an unknown name is a ConfigError naming the known ones."""
    names = [n.strip() for n in report_to.split(",") if n.strip()]
    for name in names:
        pick({"none": None, **REPORTERS}, name, "train.report_to")
    return [n for n in dict.fromkeys(names) if n != "none"]


def open_reporters(report_to: str, out: Path, config: dict) -> Reporter | None:
    """One Reporter that logs to every reporter in `report_to`; None for `none`."""
    opened = [REPORTERS[name](Path(out), config) for name in reporter_names(report_to)]
    if not opened:
        return None

    def log(metrics: dict, step: int) -> None:
        for r in opened:
            r.log(metrics, step)

    def close() -> None:
        for r in opened:
            r.close()

    return Reporter(log, close)
