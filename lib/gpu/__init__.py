"""Paper-scale runs on a lent GPU: the queue, one command per window, and what travels to and from it.

* :mod:`lib.gpu.queue` -- every paper-scale run of the book's pages (:mod:`lib.pages`), trained a
  window at a time under a hard deadline and published to ``results/``.
* :mod:`lib.gpu.window` -- ``python -m lib paper``: one command per call of a window.
* :mod:`lib.gpu.packs` -- data sets as chunks small enough for one transfer each.
* :mod:`lib.gpu.transfer` -- a window's records out in one archive and back into ``results/``.
* :mod:`lib.gpu.projection` -- GPU-minutes and windows the plan needs, from committed benchmarks.
* :mod:`lib.gpu.selftest` -- a few-second check of the stacked engine on the machine.
"""
