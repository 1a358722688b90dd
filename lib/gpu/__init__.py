"""Paper-scale runs on a lent GPU: the window code, at the top of the layers (no notebook imports it).

Imports point one way: :mod:`~lib.gpu.window` (the command) uses the others; :mod:`~lib.gpu.cluster`
uses the queue, the projection and :mod:`~lib.gpu.jobs`; the queue uses the
projection and the transfer; the transfer and the pages' paper-scale sections read ``results/``
through :mod:`lib.results`.

* :mod:`lib.gpu.window` -- ``python -m lib paper``: one command per call to the machine.
* :mod:`lib.gpu.cluster` -- ``python -m lib paper --launch slurm|local``: the same runs as submitit jobs
  (a SLURM job array, or processes here), each training a pack through the queue's ``run_queue``.
* :mod:`lib.gpu.jobs` -- the cluster jobs' bookkeeping (``<cache>/slurm/launches.json``), states and logs.
* :mod:`lib.gpu.recipe` -- the steps of a window (``results/README.md`` shows them; a test rehearses them).
* :mod:`lib.gpu.queue` -- every paper-scale run of the book's pages (:mod:`lib.pages`), trained a call at
  a time under a hard deadline and published to ``results/``.
* :mod:`lib.gpu.packs` -- data sets as compressed packs that one call carries.
* :mod:`lib.gpu.transfer` -- a call's records out in archives and back into ``results/``.
* :mod:`lib.gpu.projection` -- GPU-minutes and windows the plan needs, and the runs one call can finish.
* :mod:`lib.gpu.selftest` -- a few-second check of the packed engine on the machine.
"""
