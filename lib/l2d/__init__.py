"""Paper 2, calibration of multi-expert learning to defer: the surrogates (:mod:`~lib.l2d.surrogates`),
experts (:mod:`~lib.l2d.synthetic_experts`), runs (:mod:`~lib.l2d.experiment`,
:mod:`~lib.l2d.cifar10`), tables and claims (:mod:`~lib.l2d.results`), figures and pages (:mod:`~lib.l2d.pages`)."""
