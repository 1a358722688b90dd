"""Calibration metrics (:mod:`lib.calibration.metrics`, :mod:`lib.calibration.ece_kde`) and post-hoc
calibrators (:mod:`lib.calibration.posthoc`: the one :class:`~lib.calibration.posthoc.TemperatureScaler`,
Platt scaling, histogram binning), shared by all four papers.
"""
