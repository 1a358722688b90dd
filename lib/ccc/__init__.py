"""Paper 3, calibration, cascading and cleaning: its methods and its pages.

Methods (what the book teaches): :mod:`~lib.ccc.confidence` (a model's calibrated top-1
confidence), :mod:`~lib.ccc.cascade` (equal-count bins, the calibrated confidence advantage, the
cascade curve, APGR, and routing between two models of the same size), :mod:`~lib.ccc.cleaning`
(the two-model label-cleaning rule, noise injection, Confident Learning); figures in
:mod:`~lib.ccc.plots`.

Pages, one module per notebook: :mod:`lib.ccc.pages.calibration`, :mod:`lib.ccc.pages.cascading`,
:mod:`lib.ccc.pages.same_size`, :mod:`lib.ccc.pages.cleaning` (each with its data, run, tables,
claims and the paper's numbers).
"""
