"""Paper 3, calibration, cascading and cleaning: its methods and its pages.

Methods: :mod:`~lib.ccc.confidence` (calibrated top-1 confidence), :mod:`~lib.ccc.cascade` (the
calibrated-advantage cascade, APGR), :mod:`~lib.ccc.same_size_routing`, :mod:`~lib.ccc.cleaning`
(two-model label cleaning).

Pages: :mod:`~lib.ccc.pages`, :mod:`~lib.ccc.calibration`, :mod:`~lib.ccc.cascading`,
:mod:`~lib.ccc.same_size`, :mod:`~lib.ccc.cleaning_study`, :mod:`~lib.ccc.claims`; figures in
:mod:`~lib.ccc.plots`.
"""
