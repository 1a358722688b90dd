"""Paper 3, calibration, cascading and cleaning: a model's calibrated confidence
(:mod:`~lib.ccc.confidence`), cascades and same-size routing (:mod:`~lib.ccc.cascade`), label cleaning
(:mod:`~lib.ccc.cleaning`), figures (:mod:`~lib.ccc.plots`) and one page per notebook (:mod:`lib.ccc.pages`)."""
