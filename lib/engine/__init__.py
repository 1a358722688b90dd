"""The engine every paper's training goes through: one loop, one predict, many runs at once, one run cache.

* :mod:`lib.engine.loop` -- :func:`~lib.engine.loop.fit` (checkpoint every epoch, resume, model
  selection and early stopping as callbacks) and :func:`~lib.engine.loop.predict`.
* :mod:`lib.engine.stack` -- N runs of one architecture trained as one stacked model on one device
  (``torch.func``), each with its own seed, data order, augmentation, optimizer state and checkpoint;
  a method's own step comes in as a generic hook (:class:`~lib.engine.stack.StackStep`).
* :mod:`lib.engine.deadline` -- a hard deadline: no epoch starts that would end after it.
* :mod:`lib.engine.progress` -- one live progress line per grid of runs.
* :mod:`lib.engine.runs` -- :class:`~lib.engine.runs.Run`: results keyed by config, data and code
  version (the cache also by the live code fingerprint), verified on read, locked against concurrent
  computation, with an artifact API (:mod:`lib.engine.artifacts`: atomic writes, SHA-256-verified
  arrays; a damaged cached one is recomputed).
* :mod:`lib.engine.records` -- the checks and provenance fields shared by the typed views of paper
  2's and paper 4's run records (:mod:`lib.l2d.record`, :mod:`lib.rr.record`; paper 1's is
  :mod:`lib.moe.record`); the records themselves stay dicts on disk and in the cache.
* :mod:`lib.engine.versions` -- the code version of each group of runs and its accepted fingerprints,
  the fingerprint computed from the import closure of the modules that make its runs
  (:mod:`lib.engine.imports`, the import graph of lib read from the source).
* :mod:`lib.engine.device` -- device, precision and random state.
"""
