"""Checkpoints compared decode by decode: the folders `eval --decode A,B --templates X,Y` wrote (axes.py),
one per checkpoint, read back as one checkpoint x decoding x template grid (`daca-bench table` and
`daca-bench plot` on them).

    rows, labels = compare(["runs/axes/baseline", "runs/axes/daca"])
    print(compare_markdown(rows, labels))

Per cell (protocol, canvas length, template, decode) each checkpoint's accuracy with its 95 % bootstrap
interval (grid.csv's), and each later checkpoint minus the first, paired on the prompts both decoded, with
its 95 % interval: the prompts resampled (axes.bootstrap) over the per-prompt verdicts of the two cells'
samples.jsonl. Where a cell folder is gone (a grid.csv copied alone) the difference is of the two accuracies,
without an interval. Below the table: in how many cells each difference is above / below zero, and whether
the checkpoints' order holds in every cell, so a difference between methods that is a difference between
decodings shows as one.
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path

from ..errors import ConfigError
from .axes import bootstrap, cell_rewards

CELL = ("protocol", "gen_length", "template", "decode")
NUMBERS = ("temperature", "accuracy", "lo", "hi", "diff", "diff_lo", "diff_hi")


def is_axes(folder) -> bool:
    """Whether FOLDER is an `eval --decode/--templates` output (it holds grid.csv)."""
    return (Path(folder) / "grid.csv").is_file()


def read_grid(folder) -> list[dict]:
    """grid.csv's rows, numbers as numbers; a folder without one is one ConfigError line."""
    path = Path(folder) / "grid.csv"
    if not path.is_file():
        raise ConfigError(f"{folder}: no grid.csv; give folders `daca-bench eval --decode ... --templates ...` wrote")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    missing = [c for c in (*CELL, "accuracy", "lo", "hi") if rows and c not in rows[0]]
    if not rows or missing:
        raise ConfigError(f"{path}: {'no rows' if not rows else 'no column ' + ', '.join(missing)}")
    for r in rows:
        for k in NUMBERS:
            if k in r:
                r[k] = float(r[k]) if r[k] not in ("", None) else math.nan
        for k in ("gen_length", "n", "steps", "block_length"):
            if r.get(k) not in ("", None, "None"):
                r[k] = int(float(r[k]))
    return rows


def labels_of(folders) -> list[str]:
    """Each folder's name (its last two path parts where two share a name)."""
    names = [Path(f).resolve().name for f in folders]
    if len(set(names)) == len(names):
        return names
    return ["/".join(Path(f).resolve().parts[-2:]) for f in folders]


def _paired(folders, key) -> tuple[float, float, float] | None:
    """(later - first, lo, hi) paired on the prompts of the two cells' rows; None where a cell folder is gone."""
    protocol, length, template, decode = key
    try:
        first, later = (
            cell_rewards(Path(f) / template / decode / protocol / str(length), protocol, length) for f in folders
        )
    except (OSError, KeyError, ValueError):
        return None
    ids = sorted(set(first) & set(later))
    if not ids:
        return None
    a, b = [later[i] for i in ids], [first[i] for i in ids]
    lo, hi = bootstrap(a, b)
    return round((sum(a) - sum(b)) / len(ids), 4), lo, hi


def compare(folders, labels=None) -> tuple[list[dict], list[str]]:
    """(one row per cell, the checkpoints' labels): the cells in the first grid's order, then any others'."""
    folders = [Path(f) for f in folders]
    labels = list(labels or labels_of(folders))
    if len(labels) != len(folders):
        raise ConfigError(f"{len(labels)} labels for {len(folders)} folders")
    grids = [{tuple(r[c] for c in CELL): r for r in read_grid(f)} for f in folders]
    keys = list(dict.fromkeys(k for g in grids for k in g))
    out = []
    for key in keys:
        first = next(g[key] for g in grids if key in g)
        row = {**dict(zip(CELL, key)), "temperature": first.get("temperature"), "steps": first.get("steps")}
        for label, g in zip(labels, grids):
            r = g.get(key)
            row[label] = None if r is None else (r["accuracy"], r["lo"], r["hi"], r.get("n"))
        if len(folders) == 1:  # one checkpoint: the grid's own difference against its first cell
            r = grids[0][key]
            row["diff"] = (r["diff"], r["diff_lo"], r["diff_hi"]) if "diff" in r else None
        for j in range(1, len(folders)):
            a, b = row[labels[0]], row[labels[j]]
            paired = _paired([folders[0], folders[j]], key) if a and b else None
            row[f"{labels[j]} - {labels[0]}"] = paired or (
                (round(b[0] - a[0], 4), math.nan, math.nan) if a and b else None
            )
        out.append(row)
    return out, labels


def _interval(value) -> str:
    if value is None:
        return "—"
    x, lo, hi = value[:3]
    if math.isnan(lo) or math.isnan(hi):
        return f"{x:.3f} (unpaired)"
    return f"{x:.3f} [{lo:.3f}, {hi:.3f}]"


def columns(rows: list[dict], labels: list[str]) -> list[str]:
    """The table's columns: the cell, each checkpoint's accuracy, the differences, the best checkpoint."""
    several = len({(r["protocol"], r["gen_length"]) for r in rows}) > 1
    cell = ["template", "decode", *(["protocol", "gen_length"] if several else []), "temperature", "steps"]
    diffs = [f"{x} - {labels[0]}" for x in labels[1:]] if len(labels) > 1 else ["diff"]
    return cell + labels + diffs + (["best"] if len(labels) > 1 else [])


def _best(row: dict, labels: list[str]) -> str:
    accs = {x: row[x][0] for x in labels if row[x] is not None}
    if not accs:
        return "—"
    top = max(accs.values())
    return " = ".join(x for x, a in accs.items() if a == top)


def compare_markdown(rows: list[dict], labels: list[str]) -> str:
    """The grid as Markdown: accuracy [95 % interval] per checkpoint and cell, the paired differences, and
    below it how the differences' signs and the checkpoints' order vary over the cells."""
    cols = columns(rows, labels)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = []
        for c in cols:
            if c == "best":
                cells.append(_best(r, labels))
            elif c in labels or c == "diff" or " - " in c:
                cells.append(_interval(r.get(c)))
            else:
                cells.append(str(r.get(c)))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines + [""] + verdicts(rows, labels))


def verdicts(rows: list[dict], labels: list[str]) -> list[str]:
    """Lines under the table: how the intervals were made, then per later checkpoint the signs of its
    difference over the cells and whether the order of the checkpoints holds in every cell."""
    notes = [
        "accuracy [lo, hi]: 95 % bootstrap over prompts; "
        + (
            "B - A: paired on the prompts both decoded, 95 % bootstrap interval."
            if len(labels) > 1
            else "diff: minus the first cell on the same prompts, paired, with its 95 % interval."
        )
    ]
    for x in labels[1:]:
        d = [r[f"{x} - {labels[0]}"] for r in rows if r.get(f"{x} - {labels[0]}") is not None]
        above, below = sum(v[0] > 0 for v in d), sum(v[0] < 0 for v in d)
        sure_up, sure_down = sum(v[1] > 0 for v in d), sum(v[2] < 0 for v in d)
        holds = "holds in every cell" if not (above and below) else "flips between cells"
        notes.append(
            f"- {x} - {labels[0]}: above 0 in {above}, below 0 in {below}, equal in {len(d) - above - below} "
            f"of {len(d)} cells; interval above 0 in {sure_up}, below 0 in {sure_down}; the order {holds}."
        )
    return notes


def out_folder(folders, output_dir=None) -> Path:
    """Where the comparison goes: OUTPUT_DIR; else the folder, or several folders' common parent."""
    if output_dir:
        out = Path(output_dir)
        if not out.parent.is_dir():
            raise ConfigError(f"--output-dir {out}: folder {out.parent} does not exist")
        out.mkdir(exist_ok=True)
        return out
    if len(folders) == 1:
        return Path(folders[0])
    common = Path(os.path.commonpath([str(Path(f).resolve()) for f in folders]))
    return common if common != Path(common.anchor) else Path(folders[0])


def write_compare(folders, output_dir=None, labels=None) -> tuple[str, list[Path]]:
    """`daca-bench table` on axes folders: decodes.md and decodes.csv (each interval in its own columns)."""
    rows, labels = compare(folders, labels)
    out = out_folder(folders, output_dir)
    text = compare_markdown(rows, labels)
    md, sheet = out / "decodes.md", out / "decodes.csv"
    md.write_text(text + "\n")
    cell = [c for c in columns(rows, labels) if c not in labels and c != "best" and c != "diff" and " - " not in c]
    header = [*cell, "checkpoint", "n", "accuracy", "lo", "hi", "vs", "diff", "diff_lo", "diff_hi"]
    with open(sheet, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        for r in rows:
            for j, x in enumerate(labels):
                if r[x] is None:
                    continue
                d = r.get(f"{x} - {labels[0]}") if j else (r.get("diff") if len(labels) == 1 else None)
                vs = labels[0] if j else ("first cell" if len(labels) == 1 else "")
                writer.writerow([r[c] for c in cell] + [x, r[x][3], *r[x][:3], vs, *(d or ("", "", ""))])
    return text, [md, sheet]
