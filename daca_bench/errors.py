"""Expected failures: the typed errors raised where the input is known, and `explain`, which
turns them (and the well-known library errors a wrong path or name ends in) into the one
line the CLI prints before it exits with code 2. Anything else is a bug and keeps its traceback.

    raise ConfigError(f"{path}: not valid YAML ...")     # names the input and the fix
    line = explain(exc)                                  # None: not an expected failure
"""

from __future__ import annotations

import errno
from pathlib import Path


class UserError(Exception):
    """A failure caused by the user's input; its message names the input and the fix."""

    def __str__(self) -> str:  # KeyError and friends would quote the message
        return str(self.args[0]) if self.args else ""


class ConfigError(UserError, ValueError):
    """A config, grid or override that does not parse, or an unknown key, value or name."""


class UnknownTaskError(UserError, KeyError):
    """A task name the registry does not know (a KeyError, as registry lookups always were)."""


class RewardError(UserError, ValueError):
    """A verifier returned a value its task does not allow (outside [0, 1], or a partial score the task
    never declared): never turned into a score, nor into an infrastructure failure."""


class UnavailableError(UserError, RuntimeError):
    """Something the run needs is not on this machine: a model's weights, a GPU."""


class CheckpointError(UserError, RuntimeError):
    """A run folder whose checkpoints cannot be resumed, or a run that would be overwritten."""


class DiskFullError(UserError, OSError):
    """A save ran out of space; the previous checkpoint is intact."""


_OS_HINTS = {
    FileNotFoundError: "no such file or folder; check the path",
    IsADirectoryError: "is a folder, not a file; give a file",
    NotADirectoryError: "a part of this path is a file, not a folder; choose another path",
    PermissionError: "permission denied; choose a path you may read or write",
    FileExistsError: "exists and is not a folder; choose another path",
}


def explain(exc: BaseException) -> str | None:
    """The one line for an expected failure, or None for a bug."""
    if isinstance(exc, UserError):
        return str(exc)
    if isinstance(exc, OSError):
        where = exc.filename if exc.filename is not None else ""
        if exc.errno == errno.ENOSPC:
            return f"{where}: no space left on the device; free some space and rerun".lstrip(": ")
        if isinstance(exc, FileNotFoundError) and where and not Path(where).parent.exists():
            return f"{where}: its folder {Path(where).parent} does not exist; create it or choose another path"
        for kind, hint in _OS_HINTS.items():
            if isinstance(exc, kind):
                return f"{where}: {hint}" if where else str(exc)
        return None
    if isinstance(exc, UnicodeDecodeError):
        return f"an input file is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8"
    try:
        import yaml
    except ImportError:  # pragma: no cover - yaml is a dependency
        return None
    if isinstance(exc, yaml.YAMLError):
        return f"not valid YAML: {' '.join(str(exc).split())}"
    return None
