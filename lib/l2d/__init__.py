"""Paper 2, calibration of multi-expert learning to defer: its methods and its pages.

Methods: :mod:`~lib.l2d.surrogates` (softmax and one-vs-all surrogates, estimators of expert
correctness), :mod:`~lib.l2d.synthetic_experts`, :mod:`~lib.l2d.gaussian_mixture`, :mod:`~lib.l2d.record`.

Pages: :mod:`~lib.l2d.pages`, :mod:`~lib.l2d.experiment`, :mod:`~lib.l2d.gaussians`,
:mod:`~lib.l2d.cifar10`, :mod:`~lib.l2d.results`, :mod:`~lib.l2d.claims`; figures in :mod:`~lib.l2d.plots`.
"""
