"""The cluster jobs' bookkeeping and states: what ``python -m calibook paper --status`` and ``--job-log`` read.

A launch (:func:`calibook.gpu.cluster.launch`) records itself in ``<cache>/slurm/launches.json`` (the run
cache, :func:`lib.config.cache_dir`, ``CALIBOOK_CACHE``): its id, time, launcher (``slurm`` or
``local``), scale, pages and settings, the cache and ``results/`` its jobs write to, the folder of
submitit's files (``<cache>/slurm/jobs/<launch>/``: the pickled job, its result and its log per task,
``<job>_<task>_log.out`` and ``.err``) and per job its id, pages, shares (plan ids, one list per task)
and tasks. A job's state (:data:`STATES`) is read from what submitit wrote (its result: completed,
or failed with the error's last line), else from ``squeue`` (SLURM: queued, requeued or running) or
the job's controller process (local), else it ended without a result (a node lost, a job killed,
or timed out too often): failed, with what the accounting database says where the cluster has one.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from filelock import FileLock

from lib.config import SCALES, cache_dir
from calibook.runs import atomic_write
from calibook.results import PAGES, plan
from lib.validation import check_choice, error_line

PROG = "python -m calibook paper"

#: The job states of ``--status``; the first two are active (their runs are not submitted again);
#: ``unknown``: a SLURM job seen from a machine without ``squeue``.
STATES: tuple[str, ...] = ("queued", "running", "completed", "failed", "unknown")
ACTIVE: tuple[str, ...] = STATES[:2]

__all__ = ["ACTIVE", "STATES", "job_log", "job_runs", "job_states", "launches", "save_launch", "slurm_dir", "status"]


# ---- where the bookkeeping lives ----


def slurm_dir() -> Path:
    """``<cache>/slurm``: ``launches.json`` (the jobs launched) and ``jobs/<launch>/`` (submitit's
    pickles and logs). The run cache holds the checkpoints the jobs resume from, so it must be on a
    filesystem every node of the cluster sees."""
    return cache_dir() / "slurm"


def _book() -> Path:
    return slurm_dir() / "launches.json"


def launches() -> list[dict[str, Any]]:
    """Every launch recorded in ``<cache>/slurm/launches.json``, oldest first (empty without one)."""
    path = _book()
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"launches: {path} is not valid JSON ({err}); move it away to start afresh") from None
    return list(data.get("launches", []))


def save_launch(entry: Mapping[str, Any]) -> None:
    """Add ``entry`` to ``launches.json`` or replace the launch of the same ``id`` (locked, atomic)."""
    path = _book()
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        rows = [e for e in launches() if e.get("id") != entry["id"]] + [dict(entry)]
        rows.sort(key=lambda e: e.get("launched", ""))
        atomic_write(path, lambda tmp: tmp.write_text(json.dumps({"launches": rows}, indent=1)))


# ---- states ----


def job_runs(job: Mapping[str, Any]) -> list[str]:
    """The plan ids a recorded job holds (every task's share)."""
    return [r for share in job.get("shares", []) for r in share]


def _squeue() -> dict[str, tuple[str, str]]:
    """``squeue``'s jobs of this user by id (array tasks one by one): (state, reason); empty
    without SLURM."""
    if shutil.which("squeue") is None:
        return {}
    try:
        out = subprocess.run(
            ["squeue", "-h", "-r", "-o", "%i|%T|%r"], capture_output=True, text=True, timeout=60, check=True
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return {}
    rows = [line.split("|") for line in out.splitlines() if line.count("|") == 2]
    return {i.strip(): (t.strip(), r.strip()) for i, t, r in rows}


def _alive_local(job_id: str) -> bool:
    """Whether a local job's controller (its id is the controller's pid) still runs."""
    try:
        stat = Path(f"/proc/{int(job_id)}/stat").read_text()
        cmd = Path(f"/proc/{int(job_id)}/cmdline").read_bytes()
    except (OSError, ValueError):
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z" and b"submitit.local._local" in cmd


def _outcomes(job: Mapping[str, Any], folder: Path) -> list[tuple[str, Any]]:
    """The results submitit wrote for the tasks of ``job``: ("success", value) or ("error", traceback)."""
    from submitit.core.utils import JobPaths, pickle_load

    out = []
    for t in range(int(job.get("tasks", 1))):
        path = JobPaths(folder, job["job"], t).result_pickle
        if path.exists():
            try:
                out.append(pickle_load(path))
            except Exception as err:  # noqa: BLE001 - a damaged result reads as a failure
                out.append(("error", f"its result {path.name} cannot be read: {error_line(err)}"))
    return out


def _state(
    job: Mapping[str, Any], launch_entry: Mapping[str, Any], squeue: Mapping[str, tuple[str, str]]
) -> tuple[str, str]:
    """(state, detail) of one recorded job: one of :data:`STATES` and a few words."""
    folder = Path(launch_entry["folder"])
    outcomes = _outcomes(job, folder)
    errors = [o[1] for o in outcomes if o[0] != "success"]
    if errors:
        lines = [ln for ln in str(errors[0]).strip().splitlines() if ln.strip()]
        return "failed", lines[-1].strip() if lines else "an error"
    if len(outcomes) >= int(job.get("tasks", 1)):
        return "completed", ""
    if launch_entry.get("launcher") == "local":
        return ("running", "") if _alive_local(job["job"]) else ("failed", "ended without a result (killed?)")
    if job["job"] in squeue:
        state, reason = squeue[job["job"]]
        if state in ("RUNNING", "COMPLETING", "CONFIGURING", "STAGE_OUT", "SUSPENDED", "SIGNALING"):
            return "running", "" if state == "RUNNING" else state.lower()
        why = reason if reason and reason != "None" else ""
        return "queued", (state.lower() if state != "PENDING" else "") + (f" ({why})" if why else "")
    if shutil.which("squeue") is None:
        return "unknown", "no squeue on this machine"
    try:  # ended without a result: the accounting database (where there is one) says why
        import submitit

        told = submitit.SlurmJob(folder, job["job"]).watcher.get_state(job["job"], mode="force")
    except Exception:  # noqa: BLE001 - no sacct, no accounting
        told = "UNKNOWN"
    return "failed", told.lower() if told not in ("UNKNOWN", "", None) else "ended without a result"


def job_states(ids: Iterable[str] | None = None) -> dict[str, tuple[str, str]]:
    """(state, detail) of the recorded jobs (``ids``: only these), state one of :data:`STATES`: from
    the result submitit wrote, else ``squeue`` (SLURM) or the controller process (local), else failed."""
    want = None if ids is None else set(ids)
    rows = [(j, e) for e in launches() for j in e.get("jobs", []) if want is None or j["job"] in want]
    squeue = _squeue() if any(e.get("launcher") == "slurm" for _, e in rows) else {}
    return {j["job"]: _state(j, e, squeue) for j, e in rows}


def status(pages: Sequence[str] = PAGES, scale: str = "paper") -> str:
    """Per page: runs published, queued, running, failed and not launched (a run's state is that of
    the latest job holding it, unless it is published); then per job its state and runs published.
    For ``python -m calibook paper --status``."""
    check_choice(scale, SCALES, "scale")
    entries = [e for e in launches() if e.get("scale") == scale]
    states = job_states([j["job"] for e in entries for j in e["jobs"]])
    lines = [f"jobs launched at scale {scale}: {sum(len(e['jobs']) for e in entries)} ({_book()})"]
    latest: dict[str, str] = {}
    for e in entries:
        for j in e["jobs"]:
            latest.update(dict.fromkeys(job_runs(j), j["job"]))
    unplanned: dict[str, str] = {}
    items = plan([p for p in pages if p in PAGES], scale, unplanned)
    done = {it.id for it in items if it.done}
    failed_pages = []
    for page in dict.fromkeys(it.page for it in items):
        its = [it for it in items if it.page == page]
        count = dict.fromkeys(("published", *ACTIVE, "failed", "not launched"), 0)
        for it in its:
            if it.id in done:
                count["published"] += 1
            elif it.id in latest:
                s = states.get(latest[it.id], ("failed",))[0]
                s = "failed" if s == "completed" else s  # a job that ended, its run not in results/
                count[s] = count.get(s, 0) + 1
            else:
                count["not launched"] += 1
        lines.append(f"{page}: {len(its)} run(s): " + ", ".join(f"{n} {k}" for k, n in count.items()))
        for e in entries:
            for j in e["jobs"]:
                runs = [r for r in job_runs(j) if r.split("/", 1)[0] == page]
                if not runs:
                    continue
                state, detail = states.get(j["job"], ("failed", "not found"))
                lines.append(
                    f"  job {j['job']:>12s} ({e['launcher']}) {state:9s} {sum(r in done for r in runs)} of {len(runs)} "
                    f"run(s) published{': ' + detail if detail else ''}"
                )
        if count["failed"]:
            failed_pages.append(page)
    lines += [f"{p}: not planned here: {why}" for p, why in unplanned.items()]
    if failed_pages:
        lines.append(
            f"failed runs resume from their checkpoints when launched again: {PROG} {' '.join(failed_pages)} "
            f"--scale {scale} --launch {entries[-1]['launcher'] if entries else 'slurm'} ...; a job's log: "
            f"{PROG} --job-log JOB_ID"
        )
    return "\n".join(lines)


def job_log(job_id: str) -> str:
    """The log of job ``job_id`` (its standard output, then its standard error, each task), from the
    latest launch holding it."""
    from submitit.core.utils import JobPaths

    for e in reversed(launches()):
        for j in e["jobs"]:
            if j["job"] == job_id:
                parts = []
                for t in range(int(j.get("tasks", 1))):
                    paths = JobPaths(Path(e["folder"]), job_id, t)
                    for path in (paths.stdout, paths.stderr):
                        text = path.read_text(errors="replace") if path.exists() else "(not written yet)\n"
                        parts.append(f"==> {path} <==\n{text}")
                return "\n".join(parts)
    raise ValueError(f"job-log: no job {job_id!r} in {_book()} ({PROG} --status lists them)")
