"""The engine every paper's training goes through: one loop, one predict, many runs at once.

:mod:`~lib.engine.loop` (:func:`~lib.engine.loop.fit_packed`, one loop for G runs packed and a run alone,
:func:`~lib.engine.loop.fit`, :func:`~lib.engine.loop.predict`), :mod:`~lib.engine.packed`
(the packed layers: G runs as one module), :mod:`~lib.engine.deadline`, :mod:`~lib.engine.progress`,
:mod:`~lib.engine.plan`, :mod:`~lib.engine.device`
and :mod:`~lib.engine.cache`, the seam through which lib asks for runs: the store behind it (the run cache
keyed by config and code version) is the machinery's, :mod:`calibook.runs`. Each module's docstring says
what it does.
"""
