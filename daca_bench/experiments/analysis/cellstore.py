"""A run's cell records, from its cell folders or packed in one Parquet file: the one reader every table,
plot, notebook and script uses, and `pack`/`unpack` (the `daca-bench pack` / `unpack` commands).

    for cell in cells("results/tiny/cells"):       # results/tiny/cells.parquet, or the cells/ folders, or both
        cell.name, cell.has("eval.jsonl"), cell.json("summary.json"), cell.rows("metrics.jsonl")
    records("results/tiny", "eval")               # a table: one row per record, its JSON fields as columns

The packed file (`cells.parquet` beside cells/, or in a grid's folder) has one row per record: `cell` (its
path in the run, "start/<task>" for the RL start), `file`, `kind` (the file's name without step or suffix),
`line` (0-based in a .jsonl; 0 for a .json: the whole file), `newline` (the line ends with one) and `record`
(the exact text), so every file comes back byte for byte. A cell found as a folder wins over its packed copy
file by file (a run packed, then resumed or re-published, reads its newest records).
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import ConfigError
from ...types import record_correct

PACKED = "cells.parquet"
START = "start"  # <cells>/start/<task>: the RL start, scored on the cells' test set
RECORDS = (
    "summary.json",
    "axes.json",
    "config.json",
    "metrics.jsonl",
    "eval.jsonl",
    "dps_examples.json",
    "error.txt",
)  # the records of a cell (no weights); plus eval-step<N>.jsonl (a budget's evaluation)
_STEP = re.compile(r"eval-step\d+\.jsonl")
COLUMNS = ("cell", "file", "kind", "line", "newline", "record")


def is_record(name: str) -> bool:
    return name in RECORDS or bool(_STEP.fullmatch(name))


@dataclass(frozen=True)
class Cell:
    """One cell's record files by name: their text (packed) or their path (a folder, read when asked)."""

    name: str  # its path in the run: "base=grpo_task=sudoku_tiny_variant=+DACA_seed=0", "start/sudoku_tiny"
    where: str  # for messages: its folder, or "<packed file> [name]"
    files: dict = field(default_factory=dict)  # file name -> str (its text) or Path

    def has(self, file: str) -> bool:
        return file in self.files

    def text(self, file: str) -> str:
        if file not in self.files:
            raise FileNotFoundError(f"{self.where}: no {file}")
        got = self.files[file]
        return got.read_bytes().decode("utf-8") if isinstance(got, Path) else got

    def json(self, file: str):
        return json.loads(self.text(file))

    def rows(self, file: str) -> list:
        """A .jsonl file's records (blank lines skipped)."""
        return [json.loads(x) for x in self.text(file).split("\n") if x.strip()]  # "\n" only: a record may hold U+2028


def eval_records(cell: Cell, file: str = "eval.jsonl") -> dict[str, float | None]:
    """id -> 1.0 correct, 0.0 any other scored answer, None unscorable, from a cell's eval.jsonl: the status
    decides, never the reward (types.record_correct; eval.evaluate.read_eval_records for a file)."""
    return {row["id"]: record_correct(row, f"{cell.name}/{file}:{i}") for i, row in enumerate(cell.rows(file), 1)}


def packed_path(cells_dir: str | Path) -> Path:
    """Where CELLS_DIR's cells are packed: cells.parquet beside a cells/ folder, else inside the grid's folder."""
    cells_dir = Path(cells_dir)
    return cells_dir.parent / PACKED if cells_dir.name == "cells" else cells_dir / PACKED


def _folder_cell(folder: Path, name: str) -> Cell:
    files = {p.name: p for p in sorted(folder.iterdir()) if p.is_file() and is_record(p.name)}
    return Cell(name, str(folder), files)


def folder_cell(folder: str | Path) -> Cell:
    """One run's own folder (a `train` run's output) as a Cell (no files where it is no folder)."""
    folder = Path(folder)
    return _folder_cell(folder, folder.name) if folder.is_dir() else Cell(folder.name, str(folder))


def folder_cells(cells_dir: str | Path) -> dict[str, Cell]:
    """name -> Cell of every cell folder under CELLS_DIR (its sub-folders, and start/<task>)."""
    root, out = Path(cells_dir), {}
    if not root.is_dir():
        return out
    for sub in sorted(p for p in root.iterdir() if p.is_dir()):
        if sub.name == START:
            out.update(
                {
                    f"{START}/{t.name}": _folder_cell(t, f"{START}/{t.name}")
                    for t in sorted(p for p in sub.iterdir() if p.is_dir())
                }
            )
        else:
            out[sub.name] = _folder_cell(sub, sub.name)
    return out


def read_packed(path: str | Path) -> dict[str, Cell]:
    """name -> Cell of a packed file (its files' text rebuilt from their records)."""
    import pyarrow.parquet as pq

    t = pq.read_table(path, columns=list(COLUMNS)).to_pydict()
    parts: dict[str, dict[str, list]] = {}
    for cell, file, line, nl, record in zip(t["cell"], t["file"], t["line"], t["newline"], t["record"]):
        parts.setdefault(cell, {}).setdefault(file, []).append((line, record + ("\n" if nl else "")))
    return {
        cell: Cell(cell, f"{path} [{cell}]", {f: "".join(r for _, r in sorted(lines)) for f, lines in files.items()})
        for cell, files in sorted(parts.items())
    }


def all_cells(cells_dir: str | Path) -> dict[str, Cell]:
    """name -> Cell of a run: its packed cells, each file overlaid by the same cell folder's file."""
    packed = packed_path(cells_dir)
    out = read_packed(packed) if packed.is_file() else {}
    for name, cell in folder_cells(cells_dir).items():
        old = out.get(name)
        out[name] = cell if old is None else Cell(name, cell.where, {**old.files, **cell.files})
    return dict(sorted(out.items()))


def cells(cells_dir: str | Path) -> list[Cell]:
    """The grid's cells (not the RL start), in name order: what `<cells>/*/` globbed."""
    return [c for name, c in all_cells(cells_dir).items() if "/" not in name]


def starts(cells_dir: str | Path) -> dict[str, Cell]:
    """task -> the RL start's cell (start/<task>)."""
    return {name.split("/", 1)[1]: c for name, c in all_cells(cells_dir).items() if name.startswith(START + "/")}


def locate(folder: str | Path) -> tuple[Path, Path]:
    """(where the cells are, where their tables go) for what a user names: a grid's output folder
    (the cells inside it; tables there too), a preset's output folder (it holds cells/ or its packed
    cells.parquet; tables beside them), that cells/ folder itself or that cells.parquet (tables beside
    it, in its parent). The cells are read by cellstore.cells, packed or not."""
    folder = Path(folder)
    if folder.name == PACKED and folder.is_file():
        return folder.parent / "cells", folder.parent
    if folder.name == "cells" and not folder.is_dir() and packed_path(folder).is_file():
        return folder, folder.parent
    if not folder.is_dir():
        raise ConfigError(f"{folder}: no such folder; give a grid's output folder or a preset's (it holds cells/)")
    if ((folder / "cells").is_dir() or (folder / PACKED).is_file()) and not any(folder.glob("*/summary.json")):
        return folder / "cells", folder
    if folder.name == "cells":
        return folder, folder.parent
    return folder, folder


def is_run(folder: str | Path) -> bool:
    """Whether FOLDER (a results folder) holds cells: a cells/ folder or a packed file."""
    return (Path(folder) / "cells").is_dir() or (Path(folder) / PACKED).is_file()


def _lines(file: str, text: str) -> list[tuple[str, bool]]:
    """(record, ends with a newline) of a file: a .jsonl's lines, a .json whole."""
    if not file.endswith(".jsonl"):
        return [(text, False)]
    parts = text.split("\n")
    return [(x, True) for x in parts[:-1]] + ([(parts[-1], False)] if parts[-1] or len(parts) == 1 else [])


def _rows(run: dict[str, Cell]) -> dict[str, list]:
    entries = []
    for name, cell in run.items():
        for file in cell.files:
            kind = "eval" if _STEP.fullmatch(file) else file.split(".")[0]
            entries += [(file, name, i, kind, nl, x) for i, (x, nl) in enumerate(_lines(file, cell.text(file)))]
    entries.sort(key=lambda e: e[:3])  # a kind's records together: they compress best side by side
    order = (1, 0, 3, 2, 4, 5)  # cell, file, kind, line, newline, record
    return {c: [e[k] for e in entries] for c, k in zip(COLUMNS, order)}


def write_packed(run: dict[str, Cell], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [
            ("cell", pa.string()),
            ("file", pa.string()),
            ("kind", pa.string()),
            ("line", pa.int32()),
            ("newline", pa.bool_()),
            ("record", pa.string()),
        ]
    )
    pq.write_table(
        pa.table(_rows(run), schema=schema),
        path,
        compression="zstd",
        compression_level=19,
        use_dictionary=["cell", "file", "kind"],
    )


def write_checked(run: dict[str, Cell], path: Path) -> None:
    """write_packed(RUN) to PATH through a temporary file that is read back and compared, file by file, before
    it replaces PATH: a cell that does not read back as it was raises and leaves PATH as it was."""
    tmp = path.with_name(path.name + ".tmp")
    write_packed(run, tmp)
    back = read_packed(tmp)
    for name, cell in run.items():
        if (
            name not in back
            or set(back[name].files) != set(cell.files)
            or any(back[name].text(f) != cell.text(f) for f in cell.files)
        ):
            tmp.unlink()
            raise RuntimeError(f"{path}: cell {name} does not read back as it was; nothing removed")
    tmp.replace(path)


def write_cells(run: dict[str, Cell], cells_dir: str | Path) -> int:
    """Write RUN's cells as cell folders under CELLS_DIR. A file already there must be the same: every file is
    checked before any is written, so a differing one raises and nothing is written. Returns files written."""
    targets = [(Path(cells_dir) / name / file, cell.text(file)) for name, cell in run.items() for file in cell.files]
    for target, text in targets:
        if target.exists() and target.read_bytes().decode("utf-8") != text:
            raise ConfigError(f"{target} differs from its packed copy: move it away first")
    n = 0
    for target, text in targets:
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(text.encode("utf-8"))
            n += 1
    return n


def pack(folder: str | Path, remove: bool = False) -> tuple[Path, int, int]:
    """Pack FOLDER's cells (a preset's output folder, its cells/, or a grid's folder) into one Parquet
    file, merged with what it already packed; read it back and compare every file before anything is
    removed. REMOVE: then delete the packed record files (weights and other files stay). Refuses a
    cell without summary.json (unfinished). Returns (the file, cells, files)."""
    cells_dir, _ = locate(folder)
    run = all_cells(cells_dir)
    if not run:
        raise ConfigError(f"{folder}: no cells to pack (no cell folders and no {PACKED})")
    unfinished = [n for n, c in run.items() if not c.has("summary.json")]
    if unfinished:
        raise ConfigError(
            f"{folder}: cell {unfinished[0]} is unfinished (no summary.json; {len(unfinished)} in "
            "all): finish or remove it before packing"
        )
    path = packed_path(cells_dir)
    try:
        write_checked(run, path)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{folder}: a record file is not UTF-8 text ({exc.reason}); nothing packed") from None
    if remove:
        for cell in folder_cells(cells_dir).values():
            for p in cell.files.values():
                p.unlink()
        _prune(Path(cells_dir))
    return path, len(run), sum(len(c.files) for c in run.values())


def _prune(root: Path) -> None:
    """Remove the empty folders under ROOT, and ROOT itself when it is left empty (not a grid's folder)."""
    for d in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        if not any(d.iterdir()):
            d.rmdir()
    if root.name == "cells" and root.is_dir() and not any(root.iterdir()):
        root.rmdir()


def unpack(folder: str | Path, remove: bool = False) -> tuple[Path, int]:
    """Write FOLDER's packed cells back as cell folders (a file already there must be the same);
    REMOVE: then delete the packed file. Returns (the cells folder, files written)."""
    cells_dir, _ = locate(folder)
    path = packed_path(cells_dir)
    if not path.is_file():
        raise ConfigError(f"{folder}: no {PACKED} to unpack")
    n = write_cells(read_packed(path), cells_dir)
    if remove:
        path.unlink()
    return Path(cells_dir), n


def records(folder: str | Path, kind: str):
    """A run's records of one KIND (eval, metrics, summary, config, axes, dps_examples) as a DataFrame: one
    row per record with its cell, file and line, and the record's JSON fields as columns (a list's
    items, as in dps_examples, one row each)."""
    import pandas as pd

    cells_dir, _ = locate(folder)
    rows = []
    for name, cell in all_cells(cells_dir).items():
        for file in cell.files:
            if (kind == "eval" and _STEP.fullmatch(file)) or file.split(".")[0] == kind:
                values = cell.rows(file) if file.endswith(".jsonl") else cell.json(file)
                for i, v in enumerate(values if isinstance(values, list) else [values]):
                    rows.append({"cell": name, "file": file, "line": i, **(v if isinstance(v, dict) else {"value": v})})
    return pd.DataFrame(rows)


def copy_tree(cells_dir: str | Path, target: str | Path) -> None:
    """Every record of a run's cells (packed or not) as cell folders under TARGET (a scratch copy)."""
    for name, cell in all_cells(cells_dir).items():
        (Path(target) / name).mkdir(parents=True, exist_ok=True)
        for file in cell.files:
            got = cell.files[file]
            if isinstance(got, Path):
                shutil.copy2(got, Path(target) / name / file)
            else:
                (Path(target) / name / file).write_bytes(got.encode("utf-8"))
