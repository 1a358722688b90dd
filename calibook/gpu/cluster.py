"""The paper-scale queue's runs as cluster jobs through submitit: ``python -m calibook paper PAGES --launch slurm``.

The plan, the training and the records are the lent-GPU queue's (:mod:`calibook.gpu.queue`); only the
place differs. A launch:

* takes the unfinished runs of the plan (:func:`calibook.results.plan`; ``--runs`` narrows them to plan
  ids), less the runs of jobs still queued or running, and cuts them into **shares**
  (:func:`make_shares`): a share is one pack of runs that train together as one model
  (:func:`lib.moe.grid.stack_groups`, at most :func:`pack_size` runs; paper 1's runs of one page and
  target), or one run of a page whose runs train one at a time (the WRN and text pages). Runs that
  pages share (the same config) go with the first share that holds them. A job holds
  ``max(1, gpus_per_job)`` shares, one task (and one GPU) each.
* submits one job per share group as a submitit job array (:class:`ShareJob`; ``--launch local``:
  submitit's ``LocalExecutor``, real processes on this machine, ``--max-jobs`` at once). A job's task
  calls :func:`train_share`, which is :func:`calibook.gpu.queue.run_queue` with ``only=`` its share: the
  one function the lent-GPU calls and their worker processes use. Every finished run is published to
  ``results/`` at once, atomically and idempotently (:func:`calibook.gpu.queue.publish`: a record already
  there is neither retrained nor rewritten).
* keeps its bookkeeping in ``<cache>/slurm/launches.json`` (the run cache, :func:`lib.config.cache_dir`):
  per launch its settings and per job its id, pages and runs; submitit's files (pickles, logs) go to
  ``<cache>/slurm/jobs/<launch>/``.

A job near its time limit gets SLURM's ``--signal`` (USR2, ``signal_delay_s`` before its end; a
cluster may send it on preemption too): submitit calls :meth:`ShareJob.checkpoint`, which hands back
the same share to requeue (at most :data:`MAX_REQUEUES` times), and the requeued job resumes every
run from its last epoch's checkpoint in the run cache (as does a job the cluster requeues itself). A
job that failed (an error, a node lost, a preemption that cancelled it, requeues used up) shows as
failed in ``--status``; launching the same pages again submits its unpublished runs again, which
resume from their checkpoints.
Nothing published is lost: records are only ever added. The cache and ``results/`` (and the
repository with its ``.venv``) must be on a filesystem every node sees.

``--status`` (:func:`calibook.gpu.jobs.status`) says per page how many runs are published, queued,
running, failed or not launched, and per job its state; ``--job-log JOB`` (:func:`calibook.gpu.jobs.job_log`)
prints a job's log (the bookkeeping: :mod:`calibook.gpu.jobs`).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lib.config import SCALES, cache_dir
from calibook.artifacts import results_dir
from lib import config
from lib.engine.plan import Item
from calibook.gpu import projection
from calibook.gpu.jobs import ACTIVE, PROG, job_log, job_runs, job_states, launches, save_launch, slurm_dir, status
from calibook.gpu.queue import run_queue
from lib.moe.grid import CPU_STACK, stack_groups
from calibook.pages import get as get_page
from calibook.results import PAGES, plan, select
from lib.validation import check_choice, check_int

#: Where the jobs run: a SLURM cluster (``sbatch``), or this machine through submitit's local executor.
LAUNCHERS: tuple[str, ...] = ("slurm", "local")

#: How many times submitit requeues a job that timed out (a preempted job is requeued without count).
MAX_REQUEUES = 20

#: A job's training has no deadline of its own: SLURM's time limit (and submitit's signal) ends it.
NO_DEADLINE_MINUTES = 7 * 24 * 60.0


#: Runs per pack of a packed page where neither ``--stack``, the page's scale nor a CUDA benchmark says.
DEFAULT_PACK = CPU_STACK

#: Minutes a job may run (``--time``) when not given.
DEFAULT_MINUTES = 240

_NAME = r"[A-Za-z0-9][A-Za-z0-9_.\-]*"

__all__ = [
    "DEFAULT_MINUTES",
    "DEFAULT_PACK",
    "LAUNCHERS",
    "MAX_REQUEUES",
    "ShareJob",
    "launch",
    "main",
    "make_shares",
    "pack_size",
    "parse_account",
    "parse_gpus",
    "parse_job_minutes",
    "parse_minutes",
    "parse_max_jobs",
    "parse_partition",
    "plan_table",
    "train_share",
]


# ---- command-line values (argparse types: a bad one is a one-line error naming the option) ----


def parse_partition(text: str) -> str:
    """``--partition``: a SLURM partition name, or several separated by commas (``gpu`` or ``a100,h100``)."""
    if not re.fullmatch(f"{_NAME}(,{_NAME})*", text):
        raise argparse.ArgumentTypeError(
            f"must be a partition name or names separated by commas (letters, digits, _ . -), got {text!r}"
        )
    return text


def parse_account(text: str) -> str:
    """``--account``: a SLURM account name."""
    if not re.fullmatch(_NAME, text):
        raise argparse.ArgumentTypeError(f"must be an account name (letters, digits, _ . -), got {text!r}")
    return text


def parse_minutes(text: str) -> float:
    """``--minutes`` (the window) and ``--time`` (a job): a finite number of minutes > 0."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of minutes, got {text!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive finite number of minutes, got {text!r}")
    return v


def parse_job_minutes(text: str) -> int:
    """``--time``: the minutes each job may run, :func:`parse_minutes` rounded up to whole minutes, as
    SLURM counts them."""
    return math.ceil(parse_minutes(text))


def int_at_least(minimum: int, why: str = "") -> Callable[[str], int]:
    """An argparse type: an integer >= ``minimum`` (``why``: what the bound means), one-line errors."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if v < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}{why}, got {text!r}")
        return v

    parse.__doc__ = f"An argparse type: an integer >= {minimum}{why}."
    return parse


#: ``--gpus-per-job`` (0: CPU jobs, e.g. a smoke test on a cluster without GPUs), ``--max-jobs`` (at once).
parse_gpus = int_at_least(0, " (0: CPU jobs)")
parse_max_jobs = int_at_least(1, " (jobs running at once)")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The cluster options of ``python -m calibook paper`` (:mod:`calibook.gpu.window` parses them)."""
    g = ap.add_argument_group("cluster jobs (calibook.gpu.cluster; book: Running the paper scale on a cluster)")
    g.add_argument(
        "--launch",
        choices=LAUNCHERS,
        help="submit the plan's unfinished runs as jobs: slurm (sbatch, a job array) or local (this machine)",
    )
    g.add_argument("--partition", type=parse_partition, help="SLURM partition(s), comma-separated")
    g.add_argument("--account", type=parse_account, help="SLURM account to charge")
    g.add_argument(
        "--gpus-per-job",
        type=parse_gpus,
        default=1,
        help="GPUs per job, one share (pack of runs) per GPU; 0: CPU jobs (default 1)",
    )
    g.add_argument(
        "--time",
        type=parse_job_minutes,
        default=DEFAULT_MINUTES,
        metavar="MINUTES",
        help=f"minutes each job may run; a job cut by it is requeued from its checkpoints (default {DEFAULT_MINUTES})",
    )
    g.add_argument("--max-jobs", type=parse_max_jobs, help="jobs running at once (default: SLURM's choice; local: 1)")
    g.add_argument("--wait", action="store_true", help="after --launch slurm, wait until no job is queued or running")
    g.add_argument("--status", action="store_true", help="per page and job: queued, running, failed, published")
    g.add_argument("--job-log", metavar="JOB_ID", help="print the log of one job (ids: --status)")


# ---- shares: which runs one job trains ----


def pack_size(page: str, scale: str, stack: int | None = None, bench: projection.Bench | None = None) -> int:
    """Runs of ``page`` that one share holds: 1 for a page whose runs train one at a time (no
    benchmark data set: the WRN and text pages); else ``stack`` where given, the page's ``stack``
    setting at ``scale`` where set (smoke: 8), the pack the committed CUDA benchmark measured to pay
    (``bench``, default :func:`calibook.gpu.projection.bench`), or :data:`DEFAULT_PACK`."""
    p = get_page(page)
    if not p.bench:
        return 1
    if stack is not None:
        return check_int(stack, "stack")
    n = int(config.settings(p.name, scale).get("stack") or 0)
    if n > 0:
        return n
    b = bench or projection.bench()
    return b.stack if not b.cpu_extrapolated else DEFAULT_PACK


def make_shares(
    items: Sequence[Item], scale: str, stack: int | None = None, per_job: int = 1, bench: projection.Bench | None = None
) -> list[list[list[Item]]]:
    """``items`` (plan order) as jobs, each a list of ``per_job`` shares (one per task), each share a
    list of items: per page and target, runs that train together as one pack
    (:func:`lib.moe.grid.stack_groups`, at most :func:`pack_size` runs), or one run each for pages
    that train one at a time. A run whose config an earlier share holds (pages share runs) joins it."""
    check_int(per_job, "per_job")
    bench = bench or projection.bench()
    shares: list[list[Item]] = []
    where: dict[tuple[str | None, str], int] = {}  # (target, repr of a config) -> its share
    for key in dict.fromkeys((it.page, it.target) for it in items):
        fresh: list[Item] = []
        for it in (it for it in items if (it.page, it.target) == key):
            if (it.target, repr(it.config)) in where:
                shares[where[it.target, repr(it.config)]].append(it)
            else:
                fresh.append(it)
        n = pack_size(key[0], scale, stack, bench)
        if fresh and n > 1 and hasattr(fresh[0].config, "warmup"):  # paper 1's TrainConfigs
            by_id = {id(it.config): it for it in fresh}
            groups = [[by_id[id(c)] for c in g] for g in stack_groups([it.config for it in fresh], n)]
        else:
            groups = [fresh[i : i + n] for i in range(0, len(fresh), n)]
        for g in groups:
            where.update(((it.target, repr(it.config)), len(shares)) for it in g)
            shares.append(g)
    return [shares[i : i + per_job] for i in range(0, len(shares), per_job)]


def _share_minutes(share: Sequence[Item], scale: str, stack: int, b: projection.Bench) -> float | None:
    """GPU-minutes the CUDA benchmark ``b`` projects for one share at paper scale (``None``: not
    paper scale, or not covered)."""
    if scale != "paper":
        return None
    dataset = get_page(share[0].page).bench
    if b.cpu_extrapolated or not dataset or not all(hasattr(it.config, "warmup") for it in share):
        return None
    secs = projection.batch_seconds(b, dataset, [it.config for it in share], stack)
    return None if secs is None else secs / 60


# ---- a job ----


def _sizing(scale: str) -> projection.Bench | None:
    """The CUDA benchmark of this device at paper scale on a GPU (the queue then compiles packs where
    it measured that cheaper, as a lent-GPU call does), else ``None``."""
    import torch

    from lib.engine.device import device_name, resolve_device

    if scale != "paper" or not torch.cuda.is_available():
        return None
    b = projection.bench(device=device_name(resolve_device("auto")))
    return None if b.cpu_extrapolated else b


def train_share(
    pages: Sequence[str], runs: Iterable[str], scale: str, stack: int | None = None, log: Callable[[str], None] = print
) -> tuple[list[Path], list[str]]:
    """Train and publish the plan ids ``runs`` of ``pages``: :func:`calibook.gpu.queue.run_queue` with
    ``only=runs`` and no deadline of its own (the job's time limit ends it). Returns the records it
    published and the ids of ``runs`` still not in ``results/``. Pages that cannot run here raise."""
    want = set(runs)
    if not want:
        return [], []
    done = run_queue(
        list(pages), NO_DEADLINE_MINUTES, scale, stack, log=log, strict=True, only=want, sizing=_sizing(scale)
    )
    left = [it.id for it in plan(pages, scale) if it.id in want and not it.done]
    return done, left


def _pick_gpu(local_rank: int, tasks: int) -> str | None:
    """Give a task of a job with several tasks its own GPU (``CUDA_VISIBLE_DEVICES``: the
    ``local_rank``-th of those the job sees), before CUDA starts. Returns what it set, or ``None``."""
    seen = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d]
    if tasks > 1 and len(seen) >= tasks:
        os.environ["CUDA_VISIBLE_DEVICES"] = seen[local_rank]
        return seen[local_rank]
    return None


@dataclass
class ShareJob:
    """What one job runs: per task (``shares[global rank]``) one share of plan ids of ``pages`` at
    ``scale``, through :func:`train_share`, in packs of at most ``stack``; ``cache`` and ``results``:
    the folders of the launching machine; ``command``: the launch, for the records' provenance;
    ``attempt``: 1, then one more at each requeue (:meth:`checkpoint`). Checkpointable the way
    submitit's ``helpers.Checkpointable`` is (submitit calls its ``checkpoint`` method), without
    importing submitit where it is not installed (a lent GPU machine)."""

    pages: list[str]
    shares: list[list[str]]
    scale: str
    stack: int | None
    cache: str
    results: str
    command: str
    attempt: int = 1

    def __call__(self) -> dict[str, Any]:
        """Train this task's share; returns its published records and runs; raises when runs are left."""
        import submitit

        env = submitit.JobEnvironment()
        rank = env.global_rank
        gpu = _pick_gpu(env.local_rank, env.num_tasks)
        os.environ["CALIBOOK_CACHE"], os.environ["CALIBOOK_RESULTS"] = self.cache, self.results
        os.environ.setdefault("TQDM_DISABLE", "1")
        runs = self.shares[rank] if rank < len(self.shares) else []
        sys.argv = [f"{self.command} (job {env.job_id}, task {rank}, attempt {self.attempt})"]  # records say so
        print(
            f"job {env.job_id} task {rank} on {env.hostname}: attempt {self.attempt}, {len(runs)} run(s) of "
            f"{', '.join(self.pages)} at scale {self.scale}"
            + (f", GPU {gpu}" if gpu is not None else "")
            + ("; runs resume from their checkpoints" if self.attempt > 1 else ""),
            flush=True,
        )
        published, left = train_share(self.pages, runs, self.scale, self.stack, log=lambda s: print(s, flush=True))
        if left:
            raise RuntimeError(
                f"{len(left)} run(s) of this job are not in results/ ({', '.join(left[:3])}"
                f"{', ...' if len(left) > 3 else ''}): see the lines above; launching again resumes them"
            )
        print(f"job {env.job_id} task {rank}: published {len(published)} record(s); every run of its share is in")
        return {"runs": runs, "published": [str(p) for p in published]}

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        """Timed out or preempted: the same share, requeued (a submitit ``DelayedSubmission``); its runs
        resume from the checkpoints every epoch leaves in the run cache, and what was published stays."""
        from submitit.helpers import DelayedSubmission

        return DelayedSubmission(replace(self, attempt=self.attempt + 1))


# ---- launching ----


def _executor(
    launcher: str,
    folder: Path,
    minutes: int,
    gpus: int,
    partition: str | None,
    account: str | None,
    max_jobs: int | None,
) -> Any:
    """A submitit executor: ``LocalExecutor`` or ``SlurmExecutor`` with the launch's settings."""
    import submitit

    tasks = max(1, gpus)
    signal_delay = int(min(90, max(5, minutes * 60 // 10)))  # submitit's USR2, this long before the end
    if launcher == "local":
        ex: Any = submitit.LocalExecutor(folder, max_num_timeout=MAX_REQUEUES)
        ex.update_parameters(timeout_min=minutes, gpus_per_node=gpus, tasks_per_node=tasks, signal_delay_s=signal_delay)
        return ex
    ex = submitit.SlurmExecutor(folder, max_num_timeout=MAX_REQUEUES)
    params: dict[str, Any] = {"time": minutes, "ntasks_per_node": tasks, "signal_delay_s": signal_delay}
    params["job_name"] = "calibook"
    if gpus:
        params["gpus_per_node"] = gpus
    if partition:
        params["partition"] = partition
    if account:
        params["account"] = account
    if max_jobs:
        params["array_parallelism"] = max_jobs
    ex.update_parameters(**params)
    return ex


def _check_launcher(launcher: str) -> None:
    check_choice(launcher, LAUNCHERS, "launch")
    if launcher == "slurm":
        lacking = [c for c in ("sbatch", "srun", "squeue") if shutil.which(c) is None]
        if lacking:
            raise ValueError(
                f"launch: no `{lacking[0]}` on PATH: --launch slurm submits from a SLURM login node "
                "(--launch local runs the same jobs on this machine)"
            )


def _check_values(
    scale: str,
    launcher: str,
    stack: int | None,
    gpus_per_job: int,
    minutes: int,
    partition: str | None,
    account: str | None,
    max_jobs: int | None,
) -> None:
    """``ValueError`` naming the first bad argument of :func:`launch`."""
    check_choice(scale, SCALES, "scale")
    check_choice(launcher, LAUNCHERS, "launch")
    check_int(gpus_per_job, "gpus_per_job", minimum=0)
    check_int(minutes, "minutes")
    for value, name in ((stack, "stack"), (max_jobs, "max_jobs")):
        if value is not None:
            check_int(value, name)
    for value, name, parse in ((partition, "partition", parse_partition), (account, "account", parse_account)):
        if value is not None:
            try:
                parse(value)
            except argparse.ArgumentTypeError as err:
                raise ValueError(f"{name}: {err}") from None


def _todo(
    pages: Sequence[str],
    scale: str,
    runs: Iterable[str] | None,
    strict: bool,
    log: Callable[[str], None],
    target: str | None = None,
) -> list[Item]:
    """The runs a launch submits: planned (``runs``: only these ids; ``target``: only its runs,
    :func:`calibook.results.select`), not in ``results/``, in no job queued or running."""
    unplanned: dict[str, str] = {}
    items = plan(pages, scale, unplanned)
    for name, why in unplanned.items():
        if strict:
            raise ValueError(f"pages: {name} cannot be planned here: {why}")
        log(f"skipped {name}: {why}")
    todo = [it for it in select(items, runs, target) if not it.done]
    states = job_states()
    held_by = (*ACTIVE, "unknown")  # a SLURM job this machine cannot see may still run
    busy = {r: j["job"] for e in launches() for j in e["jobs"] if states[j["job"]][0] in held_by for r in job_runs(j)}
    held = sorted({busy[it.id] for it in todo if it.id in busy})
    if held:
        n = sum(it.id in busy for it in todo)
        log(f"{n} run(s) are in jobs queued, running or unseen from here ({', '.join(held)}): not submitted again")
    return [it for it in todo if it.id not in busy]


def _describe(
    jobs: Sequence[Sequence[Sequence[Item]]], scale: str, stack: int | None, minutes: int, b: projection.Bench
) -> list[str]:
    """One line per share of ``jobs``: its runs and, at paper scale, its projected GPU-minutes."""
    lines = []
    for i, job in enumerate(jobs):
        for s in job:
            mins = _share_minutes(s, scale, pack_size(s[0].page, scale, stack, b), b)
            ids = ", ".join(it.id.split("/", 1)[1] for it in s[:4]) + (", ..." if len(s) > 4 else "")
            cost = "" if mins is None else f" (~{mins:.0f} GPU-min projected"
            cost += (
                "" if mins is None else (", more than --time: requeued from checkpoints)" if mins > minutes else ")")
            )
            lines.append(f"  job {i}: {len(s)} run(s) of {s[0].page}: {ids}{cost}")
    return lines


def launch(
    pages: Sequence[str] = PAGES,
    scale: str = "paper",
    launcher: str = "slurm",
    *,
    stack: int | None = None,
    gpus_per_job: int = 1,
    minutes: int = DEFAULT_MINUTES,
    partition: str | None = None,
    account: str | None = None,
    max_jobs: int | None = None,
    runs: Iterable[str] | None = None,
    target: str | None = None,
    wait: bool = False,
    dry_run: bool = False,
    strict: bool = False,
    poll: float = 2.0,
    log: Callable[[str], None] = print,
) -> list[str]:
    """Submit the unfinished runs of ``pages`` at ``scale`` (``runs``: only these plan ids; ``target``:
    only that target's runs, e.g. one PACS domain) that no
    queued or running job holds, as the jobs of :func:`make_shares` (``gpus_per_job`` shares each,
    packs of at most ``stack``), each running ``minutes`` at most, through ``launcher`` (``slurm``:
    one submitit job array, ``max_jobs`` at once; ``local``: this machine, ``max_jobs`` (default 1)
    at once, waiting for them). Records the launch (:func:`calibook.gpu.jobs.save_launch`) and returns
    the job ids. ``dry_run``: say what would be submitted, submit nothing. ``wait``: return when no
    job of this launch is queued or running. A page that cannot be planned here is skipped with a
    line, or with ``strict`` raises."""
    _check_values(scale, launcher, stack, gpus_per_job, minutes, partition, account, max_jobs)
    if not dry_run:
        _check_launcher(launcher)
    todo = _todo(pages, scale, runs, strict, log, target)
    b = projection.bench()
    jobs = make_shares(todo, scale, stack, max(1, gpus_per_job), b)
    if not jobs:
        log(f"nothing to submit: every planned run of {', '.join(pages)} at scale {scale} is in results/ or in a job")
        return []
    log(
        f"{'would submit' if dry_run else 'submitting'} {len(jobs)} {launcher} job(s) for {len(todo)} run(s) of "
        f"{', '.join(dict.fromkeys(it.page for it in todo))} at scale {scale}: {max(1, gpus_per_job)} share(s) "
        f"per job, {gpus_per_job} GPU(s), {minutes} min each"
        + (f", partition {partition}" if partition else "")
        + (f", account {account}" if account else "")
    )
    for line in _describe(jobs, scale, stack, minutes, b):
        log(line)
    if dry_run:
        return []
    now = datetime.now(timezone.utc)
    entry: dict[str, Any] = {
        "id": now.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6],
        "launched": now.isoformat(timespec="seconds"),
        "launcher": launcher,
        "scale": scale,
        "pages": list(pages),
        "gpus_per_job": gpus_per_job,
        "minutes": minutes,
        "partition": partition,
        "account": account,
        "command": f"{PROG} {' '.join(pages)} --scale {scale} --launch {launcher}",
        "cache": str(cache_dir()),
        "results": str(results_dir()),
        "jobs": [],
    }
    entry["folder"] = str(slurm_dir() / "jobs" / entry["id"])
    ex = _executor(launcher, Path(entry["folder"]), minutes, gpus_per_job, partition, account, max_jobs)
    fns = [
        ShareJob(
            pages=list(dict.fromkeys(it.page for s in job for it in s)),
            shares=[[it.id for it in s] for s in job],
            scale=scale,
            stack=max(pack_size(s[0].page, scale, stack, b) for s in job),
            cache=entry["cache"],
            results=entry["results"],
            command=entry["command"],
        )
        for job in jobs
    ]

    def record(job_id: str, fn: ShareJob) -> None:
        entry["jobs"].append({"job": job_id, "pages": fn.pages, "shares": fn.shares, "tasks": max(1, gpus_per_job)})
        save_launch(entry)
        log(f"submitted job {job_id}: {sum(map(len, fn.shares))} run(s); its log: {PROG} --job-log {job_id}")

    if launcher == "slurm":
        for job, fn in zip(ex.submit_array(fns), fns):
            record(job.job_id, fn)
        log(f"status: {PROG} {' '.join(pages)} --scale {scale} --status")
        if wait:
            _wait([j["job"] for j in entry["jobs"]], poll, log)
    else:  # local: at most max_jobs at once, this process waits for them
        _run_local(ex, fns, max_jobs or 1, record, poll, log)
    return [j["job"] for j in entry["jobs"]]


def _run_local(
    ex: Any,
    fns: Sequence[ShareJob],
    at_once: int,
    record: Callable[[str, ShareJob], None],
    poll: float,
    log: Callable[[str], None],
) -> None:
    """Run ``fns`` through the local executor, ``at_once`` at a time, each recorded when it starts."""
    waiting, running = list(fns), []
    while waiting or running:
        while waiting and len(running) < at_once:
            job = ex.submit(waiting[0])
            record(job.job_id, waiting.pop(0))
            running.append(job)
        time.sleep(poll)
        for job in [j for j in running if j.done()]:
            running.remove(job)
            state, detail = job_states([job.job_id]).get(job.job_id, ("failed", ""))
            log(f"job {job.job_id}: {state}{': ' + detail if detail else ''}")


def _wait(ids: Sequence[str], poll: float, log: Callable[[str], None]) -> None:
    """Return when none of the jobs ``ids`` is queued or running, saying each change of state."""
    seen: dict[str, tuple[str, str]] = {}
    while True:
        now = job_states(ids)
        for j in ids:
            if now.get(j) != seen.get(j):
                state, detail = now.get(j, ("failed", "not found"))
                log(f"job {j}: {state}{': ' + detail if detail else ''}")
        seen = now
        if not any(s[0] in ACTIVE for s in now.values()):
            return
        time.sleep(poll)


# ---- the book's table ----


def plan_table(scale: str = "paper", stack: int | None = None, gpus_per_job: int = 1) -> str:
    """Markdown: per page, the runs planned and published, the jobs a launch submits for the rest
    (:func:`make_shares`) with their most runs, and the GPU-hours left and the longest job as the
    committed CUDA benchmark projects them (:func:`calibook.gpu.projection.page_minutes`, the dry run's
    figures); for the book's cluster page, generated when the book is staged."""
    b = projection.bench()
    unit = "CPU-hours left (cpu-extrapolated)" if b.cpu_extrapolated else "GPU-hours left"
    unplanned: dict[str, str] = {}
    items = plan(PAGES, scale, unplanned)
    rows = [
        f"Projected from `{b.source}` for the plan at scale `{scale}` and what `results/` holds; "
        f"{gpus_per_job} GPU per job.\n",
        f"| page | runs | published | jobs to submit | most runs in a job | {unit} | longest job |",
        "|---|---|---|---|---|---|---|",
    ]
    total = 0.0
    for page in dict.fromkeys(it.page for it in items):
        its = [it for it in items if it.page == page]
        left = [it for it in its if not it.done]
        jobs = make_shares(left, scale, stack, max(1, gpus_per_job), b)
        mins = projection.page_minutes(left, b) if left else 0.0
        total += mins or 0.0
        n = pack_size(page, scale, stack, b)
        longest = max((m for job in jobs for s in job if (m := _share_minutes(s, scale, n, b))), default=None)
        rows.append(
            f"| {page} | {len(its)} | {len(its) - len(left)} | {len(jobs)} | "
            f"{max((sum(map(len, j)) for j in jobs), default=0)} | "
            + ("no benchmark yet" if mins is None else f"{mins / 60:.1f}")
            + f" | {'-' if longest is None else f'{longest:.0f} min'} |"
        )
    rows += [f"| {page} | not planned here: {why} | | | | | |" for page, why in unplanned.items()]
    rows.append(f"| benchmarked pages | | | | | {total / 60:.1f} | |")
    return "\n".join(rows)


# ---- the command ----


def main(args: argparse.Namespace, pages: Sequence[str], explicit: bool) -> int:
    """``python -m calibook paper`` with ``--launch``, ``--status`` or ``--job-log`` (parsed by
    :mod:`calibook.gpu.window`, which reports errors). Returns the exit code: 1 when a waited-for job failed."""
    if args.job_log:
        print(job_log(args.job_log))
        return 0
    if args.status:
        print(status(pages, args.scale))
        return 0
    ids = launch(
        pages,
        args.scale,
        args.launch,
        stack=args.stack,
        gpus_per_job=args.gpus_per_job,
        minutes=args.time,
        partition=args.partition,
        account=args.account,
        max_jobs=args.max_jobs,
        runs=args.runs,
        target=args.target,
        wait=args.wait,
        dry_run=args.dry_run,
        strict=explicit,
        log=lambda s: print(s, flush=True),
    )
    waited = args.launch == "local" or args.wait
    failed = [j for j, s in job_states(ids).items() if s[0] == "failed"] if waited and ids else []
    return 1 if failed else 0
