"""`daca-bench pack` / `unpack`: a run's cell records in one Parquet file and back (the library is
experiments/analysis/cellstore.py).

    daca-bench pack runs/my-grid              # writes runs/my-grid/cells.parquet; the cell folders stay
    daca-bench pack results/my-preset --remove  # then deletes the packed record files (weights stay)
    daca-bench unpack results/tiny            # the cell folders again (results/tiny/cells/...), to inspect

`pack` refuses a run with an unfinished cell (no summary.json) and reads the file back, file for file,
before anything is removed; `table`, `plot` and the notebook read a run packed or not.
"""

from __future__ import annotations

from ..analysis.cellstore import pack, unpack


def configure(parser) -> None:
    parser.add_argument(
        "results",
        help="a grid's output folder (one sub-folder per cell), or a preset's (it holds cells/ or cells.parquet)",
    )
    parser.add_argument(
        "--remove",
        action="store_true",
        help="pack: then delete the packed record files (weights and other files stay); unpack: "
        "then delete cells.parquet",
    )


def run(args) -> int:
    if args.command == "unpack":
        where, n = unpack(args.results, remove=args.remove)
        print(f"wrote {n} file(s) under {where}" + (" and removed the packed file" if args.remove else ""))
        return 0
    path, cells, files = pack(args.results, remove=args.remove)
    print(
        f"packed {files} files of {cells} cells into {path} ({path.stat().st_size:,} bytes; read back equal)"
        + ("; removed the cell folders' copies" if args.remove else "")
    )
    return 0
