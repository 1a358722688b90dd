"""Paper-scale runs on a lent GPU: the window code, at the top of the layers (no notebook imports it).

Imports point one way: :mod:`~calibook.gpu.window` (the command) uses the others; :mod:`~calibook.gpu.cluster`
uses the queue, the projection and :mod:`~calibook.gpu.jobs`; the queue uses the
projection and the transfer; the transfer and the pages' paper-scale sections read ``results/``
through :mod:`calibook.results`.

* :mod:`calibook.gpu.window` -- ``python -m calibook paper``: one command per call to the machine.
* :mod:`calibook.gpu.cluster` -- ``python -m calibook paper --launch slurm|local``: the same runs as submitit jobs
  (a SLURM job array, or processes here), each training a pack through the queue's ``run_queue``.
* :mod:`calibook.gpu.jobs` -- the cluster jobs' bookkeeping (``<cache>/slurm/launches.json``), states and logs.
* :mod:`calibook.gpu.recipe` -- the steps of a window (``results/README.md`` shows them; a test rehearses them).
* :mod:`calibook.gpu.queue` -- every paper-scale run of the book's pages (:mod:`calibook.pages`), trained a call at
  a time under a hard deadline and published to ``results/``.
* :mod:`calibook.gpu.packs` -- data sets as compressed packs that one call carries.
* :mod:`calibook.gpu.transfer` -- a call's records out in archives and back into ``results/``.
* :mod:`calibook.gpu.projection` -- GPU-minutes and windows the plan needs, and the runs one call can finish.
* :mod:`calibook.gpu.selftest` -- a few-second check of the packed engine on the machine.
"""
