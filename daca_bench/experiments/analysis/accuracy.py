"""A cell's accuracy as the table, the plots and the notebook read it: the share of correct answers.

    checked_accuracy(summary["test_accuracy"], read_eval_records(cell / "eval.jsonl"), where=str(cell))

Cells written before accuracy meant the share of `status == correct` stored the mean reward, which a
partial-credit or shaped verifier lifts above it (even above 1). The stored number is kept where the
per-prompt records (or the summary's status counts) agree with it, replaced by their share of correct
answers where they do not, and refused in one line where there is nothing to check it against and it
lies outside [0, 1].
"""

from __future__ import annotations

import math

from ...errors import ConfigError
from ...types import BAD_INPUT, CORRECT, INFRA_ERROR


def share_of(records: dict | None = None, statuses: dict | None = None) -> float | None:
    """The share of correct answers from per-prompt records (id -> 1.0 / 0.0 / None: read_eval_records)
    or else from status counts ({status: count}); None where neither is given."""
    if records:
        scored = [v for v in records.values() if v is not None]
        return sum(scored) / len(scored) if scored else math.nan
    if statuses:
        scored = sum(c for s, c in statuses.items() if s not in (INFRA_ERROR, BAD_INPUT))
        return statuses.get(CORRECT, 0) / scored if scored else math.nan
    return None


def checked_accuracy(
    stored: float, records: dict | None = None, statuses: dict | None = None, where: str = "a cell"
) -> float:
    """STORED (a summary's accuracy) where it is the share of correct answers; that share, from RECORDS or
    STATUSES, where it is not (an older cell's mean reward); a ConfigError of one line where neither is
    there and STORED is outside [0, 1]."""
    share = share_of(records, statuses)
    if share is not None:
        same = share == stored or (math.isnan(share) and stored is not None and math.isnan(stored))
        return stored if same else share
    if stored is not None and math.isfinite(stored) and not 0 <= stored <= 1:
        raise ConfigError(
            f"{where}: its stored accuracy {stored:g} is outside [0, 1], a mean reward of older "
            "code, and it keeps no per-prompt records (eval.jsonl) nor status counts to count its "
            "correct answers from; rerun its evaluation, or leave the cell out"
        )
    return stored
