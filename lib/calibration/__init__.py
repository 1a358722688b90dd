"""One home for calibration metrics and post-hoc calibrators, shared by all four papers.

* :mod:`lib.calibration.metrics` -- ECE (equal-width and equal-mass bins), NLL, Brier, AURC and the
  other metrics the papers report.
* :mod:`lib.calibration.posthoc` -- temperature scaling (:class:`~lib.calibration.posthoc.TemperatureScaler`:
  one fit, with the papers' protocols and per-expert temperatures as options), Platt scaling and
  histogram binning.
* :mod:`lib.calibration.ece_kde` -- the kernel density estimate of the calibration error (ECE^KDE).
"""
