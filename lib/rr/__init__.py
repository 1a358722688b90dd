"""Paper 4, reweighted risk for calibration: its losses and its pages.

Methods: :mod:`~lib.rr.losses` (focal, inverse and dual focal, AURC, KDE-XE, the AU loss),
:mod:`~lib.rr.weights` (their sample weights and analytic curves), :mod:`~lib.rr.record`.

Pages: :mod:`~lib.rr.pages` (one module per notebook: plans, tables, the paper's numbers, claims),
with the runs they train (:mod:`~lib.rr.experiment`) and the gamma cross-validation of the
released-logits page (:mod:`~lib.rr.gamma`).
"""
