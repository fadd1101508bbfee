"""The estimator studies: what they share (`shared`: the estimator record, mask seeds, the
bootstrap), the likelihood-estimator bias (`bias`, `daca-bench likelihood-bias`), estimator
gradients against the exact one (`gradients`, `estimators`, `daca-bench estimators`) and DPS
credit against known wrong tokens (`credit_study`).

May import: the shared base, `daca_bench.engine`, `daca_bench.rl`, `daca_bench.train` (the SFT loss), `analysis`
(gold) and `grid` (a study's SFT starts come from the presets' pipeline). Never `commands`.
"""
