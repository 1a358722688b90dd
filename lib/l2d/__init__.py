"""Paper 2, calibration of multi-expert learning to defer: its methods and its pages.

Methods: :mod:`~lib.l2d.surrogates` (softmax and one-vs-all surrogates, estimators of expert
correctness), :mod:`~lib.l2d.synthetic_experts`, :mod:`~lib.l2d.gaussian_mixture`, :mod:`~lib.l2d.record`.

Pages: :mod:`~lib.l2d.pages` (one module per notebook), with what they share: the runs
(:mod:`~lib.l2d.experiment`, :mod:`~lib.l2d.gaussians`, :mod:`~lib.l2d.cifar10`), the tables and
claims (:mod:`~lib.l2d.results`); figures in :mod:`~lib.l2d.plots`.
"""
