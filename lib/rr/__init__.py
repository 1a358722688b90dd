"""Paper 4, reweighted risk for calibration: the losses (:mod:`~lib.rr.losses`) and their weights
(:mod:`~lib.rr.weights`), the runs (:mod:`~lib.rr.experiment`), the gamma cross-validation
(:mod:`~lib.rr.gamma`) and the pages (:mod:`~lib.rr.pages`)."""
