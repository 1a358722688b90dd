"""The engine every paper's training goes through: one loop, one predict, many runs at once, one run cache.

:mod:`~lib.engine.loop` (:func:`~lib.engine.loop.fit`, :func:`~lib.engine.loop.predict`), :mod:`~lib.engine.packed`
(G runs trained as one packed module), :mod:`~lib.engine.deadline`, :mod:`~lib.engine.progress`, the run cache
:mod:`~calibook.runs` (with :mod:`~calibook.artifacts`), :mod:`~lib.engine.records` (typed views of run
records), :mod:`~calibook.versions` (code versions of the run groups, from :mod:`~calibook.imports`),
:mod:`~lib.engine.plan` and :mod:`~lib.engine.device`: each module's docstring says what it does.
"""
