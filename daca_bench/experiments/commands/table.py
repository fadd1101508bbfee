"""`daca-bench table`: the command that builds a results folder's tables (the library is results.py, render.py).

    daca-bench table results/grid            # writes table.md, table.csv, table.tex beside the cells
    daca-bench table results/tiny-quick      # a preset's output folder: reads cells/, writes beside it
    daca-bench table RUN --against results/tiny   # and the replication report (experiments/analysis/replication.py)
    daca-bench table RUN --against A --against B  # against two independent runs: pooled, with heterogeneity
    daca-bench table RUN --plan 6     # and plan.md: the seeds / prompts for an MDE of 6 pp (experiments/analysis/plan.py)
    daca-bench table AXES_A AXES_B    # `eval --decode/--templates` folders: checkpoint x decoding x template (decodes.md)

Everything it is asked for is checked before any file is written: a missing or empty reference
fails in one line with the run's tables untouched.
"""

from __future__ import annotations

from ...errors import ConfigError
from ..analysis.plan import write_plan
from ..analysis.render import write_tables
from ..analysis.replicate import check_reference
from ..analysis.replication import write_report


def configure(parser) -> None:
    parser.add_argument(
        "results",
        nargs="+",
        help="a grid's output folder (one sub-folder per cell), or a preset's (it holds "
        "cells/; the tables go beside cells/); or one or more folders `eval --decode ... --templates ...` "
        "wrote (grid.csv), one per checkpoint, the first the reference: decodes.md and decodes.csv, each "
        "accuracy and each paired difference with its 95%% interval (daca_bench/eval/compare.py)",
    )
    parser.add_argument(
        "--output-dir",
        default=None,
        help="eval --decode folders only: where decodes.md / .csv go (default: the folder; several: their "
        "common parent)",
    )
    parser.add_argument(
        "--against",
        metavar="REFERENCE",
        nargs="+",
        action="append",
        default=None,
        help="also compare with another run's cells (e.g. results/tiny): both tables side by side, "
        "per comparison the difference between the runs with its interval and (Holm-adjusted) "
        "p, the pooled estimate, a verdict; judged on the seeds both runs share, or whole when "
        "they share none. Several folders after one --against are one run in parts (each task "
        "from the last folder that has it); --against again adds another independent run, "
        "pooled with heterogeneity (Cochran's Q, tau^2, I^2)",
    )
    parser.add_argument(
        "--margin",
        metavar="PP",
        type=float,
        default=None,
        help="with --against: the equivalence margin in pp; a comparison is `equivalent within ±PP` "
        "only where two one-sided tests say so (else design.json's equivalence_margin_pp; "
        "without one, no row is called equivalent)",
    )
    parser.add_argument(
        "--plan",
        metavar="PP",
        type=float,
        default=None,
        help="also write plan.md: for each comparison, the seeds or test prompts that would bring its "
        "MDE to PP percentage points, from the spread this run measured (experiments/analysis/plan.py)",
    )


def run(args) -> int:
    from ...eval.compare import is_axes, write_compare

    if any(is_axes(f) for f in args.results):
        if not all(is_axes(f) for f in args.results) or args.against or args.plan is not None:
            raise ConfigError(
                "daca-bench table: several folders are eval --decode folders (grid.csv) only, without "
                "--against or --plan; give a grid's folder alone for its tables"
            )
        text, paths = write_compare(args.results, args.output_dir)
        print(text)
        print("wrote " + ", ".join(map(str, paths)))
        return 0
    if len(args.results) > 1 or args.output_dir:
        raise ConfigError(
            "daca-bench table: one results folder (compare runs with --against); several folders and "
            "--output-dir are for eval --decode folders (grid.csv)"
        )
    args.results = args.results[0]
    if args.against:
        check_reference(args.against)  # before any table is rewritten
    table, paths = write_tables(args.results)
    print(paths[0].read_text())
    if args.against:
        ref, *others = [one[0] if len(one) == 1 else one for one in args.against]
        text, more = write_report(table, args.results, ref, others, margin=args.margin)
        print(text)
        paths += more
    if args.plan is not None:
        text, path = write_plan(args.results, args.plan)
        print(text)
        paths.append(path)
    print("wrote " + ", ".join(map(str, paths)))
    return 0
