"""Paper 4, reweighted risk for calibration: its losses and its pages.

Methods: :mod:`~lib.rr.losses` (focal, inverse and dual focal, AURC, KDE-XE, the AU loss),
:mod:`~lib.rr.weights` (their sample weights and analytic curves), :mod:`~lib.rr.record`.

Pages: :mod:`~lib.rr.pages`, :mod:`~lib.rr.experiment`, :mod:`~lib.rr.cifar10`, :mod:`~lib.rr.released`,
:mod:`~lib.rr.gamma`, :mod:`~lib.rr.claims`.
"""
