"""Experiments built on the RL core: ablation grids and their cells (`ablation`), the
parallel job runner (`jobs`), `daca-bench reproduce` with its presets (`reproduce`), the
ablation table (`results`), the plots (`plots`) and the likelihood-estimator bias study
(`bias`). How to run and read them: docs/reproducing.md.
"""
