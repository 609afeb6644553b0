"""The statistics the bench and the report share: the verdict rule (`verdict`: paired
launch ratios, their interval, equivalence and the sequential looks), the t
distribution (`tdist`), power and calibration (`power`), the error-spending boundaries
(`sequential`), the launch estimates with outliers set aside (`estimate`, `outliers`).
No phase owns them: bench decides when to stop launching with the same rule the report
prints, explain decides its reverts with it. They import nothing of a phase.
"""
