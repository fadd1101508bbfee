"""Experiments built on the RL core, in five rooms; an import only goes down this list (or into
`daca_bench.rl` and the shared base), never up:

    analysis/   reading finished cells: results (the cell table), stats, clusters, design (what a
                table registered), plan (sizing), replicate (two runs compared), cellstore (packed)
    figures/    the figures of a results folder: plots, curves, layout, gold
    grid/       running grids: cells and their runners (ablation, executors, jobs), the presets and their
                pipeline (SFT -> sweep -> grid -> table), `reproduce`, calibration, provenance
    studies/    the estimator studies: likelihood bias, estimator gradients, DPS credit
    commands/   command-line entry points with no home below: `train`, `eval`, `table`

How to run and read them: docs/reproducing.md; the map of every room: docs/getting-started.md#layout.
"""
