"""Which code and which weights a grid ran: `git describe --always --dirty` read ONCE when a run
or grid starts (the code its workers import, not what the checkout holds when a cell starts),
and a hash of the init weights' content (a cache keyed by a path misses a retrained start).

    code = describe()                     # 'v0.1-12-gabc1234-dirty', or '' outside a git checkout
    tree = code_tree()                    # the committed code's content id: equal across commits that
                                          # change only results or docs ('' outside a git checkout)
    check_tree(code, confirmatory=True)   # a dirty tree: a warning, or a refusal without --allow-dirty
    weights_hash("runs/reproduce/sft/sudoku_tiny-1a2b3c/final")   # sha256 of the folder's files
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from ...errors import ConfigError

PACKAGE = Path(__file__).resolve().parent.parent  # daca_bench/: its checkout is the code that runs


def describe(where: Path = PACKAGE) -> str:
    """`git describe --always --dirty` of the checkout holding the package ('' when not in one);
    the one reader is engine.runtime.git_describe, which a plain `train` records too (imported here,
    not at the top, so that reading a table never imports torch)."""
    from ...engine.runtime import git_describe

    return git_describe(where)


CODE_PATHS = ("daca_bench", "tasks", "configs", "sandbox", "pyproject.toml")  # what a cell's result depends on


def code_tree(where: Path = PACKAGE) -> str:
    """sha256 (16 hex digits) of the git object ids of CODE_PATHS at HEAD: the same for two commits
    whose code is the same (a design committed, then run from the commit after it that adds only
    results or docs), '' outside a git checkout. Uncommitted changes are not in it: describe's
    '-dirty' says so."""
    try:
        run = subprocess.run(
            ["git", "rev-parse", *(f"HEAD:{p}" for p in CODE_PATHS)],
            capture_output=True,
            text=True,
            cwd=where.parent,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    if run.returncode != 0:
        return ""
    return hashlib.sha256(run.stdout.encode()).hexdigest()[:16]


def check_tree(code: str, confirmatory: bool, allow_dirty: bool = False, what: str = "this run") -> None:
    """A dirty tree (uncommitted changes to tracked files) is a warning on stderr; for a confirmatory
    preset it is refused unless allow_dirty: its cells would name a commit that is not the code that ran."""
    if not code.endswith("-dirty"):
        return
    if confirmatory and not allow_dirty:
        raise ConfigError(
            f"{what} is confirmatory and the checkout has uncommitted changes ({code}); commit "
            "them or pass --allow-dirty (its cells then record the dirty tree)"
        )
    print(f"warning: the checkout has uncommitted changes ({code}); {what}'s cells record that", file=sys.stderr)


def weights_hash(init: str) -> str:
    """sha256 (first 16 hex digits) of what `init` names: a folder's files (names and bytes, sorted),
    a file's bytes, or, for a name that is no local path (a hub id, '' = the config's model), the name."""
    path = Path(init) if init else None
    if path is None or not path.exists():
        return f"name:{init}"
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        h.update(str(f.relative_to(path) if path.is_dir() else f.name).encode() + b"\0")
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        h.update(b"\0")
    return h.hexdigest()[:16]
