"""The paper-scale queue: every paper-scale run of the book, trained a call at a time on a lent GPU.

``python -m calibook paper [PAGE ...]`` (:mod:`calibook.gpu.window`) runs it on the machine.

* The plan (:func:`calibook.results.plan`) lists every run of the chosen pages at a scale in priority
  order (the pages' ``rank``: claims per GPU-minute): cifar10h, sensitivity, pacs (four targets),
  civilcomments, then the WRN pages l2d_cifar10 and losses_cifar10; inside them seed 0 of every
  method first. Runs already in ``results/`` are done.
* :func:`load_data` loads the data of each page (and PACS target) with runs left, saying its
  fingerprint (what the records' keys hold), or why a page cannot run here.
* :func:`run_queue` trains what is not done under a hard deadline (:mod:`lib.engine.deadline`), page
  by page, and publishes every finished run at once (:func:`publish`):
  ``results/<page>/<group>/<key>.json`` (the verified record, with the plan id, scale, command and
  seconds) and ``<key>.<artifact>.npz``; never checkpoints or data. Given a benchmark of this
  device (:mod:`calibook.gpu.projection`), a benchmarked page gets only the runs whose stacks end inside
  the time left, a run that would not skipped for a later one that would (a fresh machine at every
  call: a run cut by the deadline is lost); an
  out-of-memory error halves the stack and goes on. Runs finished in the local cache but not yet in
  ``results/`` are published on the next call.

The queue knows no page: it loops over the registry's pages (:mod:`calibook.pages`), each
:class:`~lib.page.Page` giving its plan, data and how its runs train (paper 1's pages stacked,
paper 2's and paper 4's WRN runs one at a time), the same definitions its notebook reads, so a page
finds the queue's runs by key.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from calibook.artifacts import results_dir
from lib import config
from lib.engine import deadline as window_deadline
from lib.engine.plan import Item, matches
from calibook.runs import RunMissing, artifact_paths, atomic_write, read_record, sign, training
from calibook.gpu.projection import Bench, fit_batch
from calibook.gpu.transfer import record_bytes
from lib.page import OnDone
from calibook.pages import get as get_page
from calibook.results import PAGES, plan, published
from lib.validation import error_line

__all__ = [
    "PAGES",
    "Item",
    "PageSkipped",
    "cannot_run",
    "data_fingerprint",
    "load_data",
    "matches",
    "plan",
    "publish",
    "published",
    "read_record",
    "run_queue",
    "stack_cap",
]

Log = Callable[[str], None]


class PageSkipped(ValueError):
    """A page the queue was asked for by name cannot run here (its data or weights are missing)."""


def publish(
    record: dict[str, Any],
    page: str,
    item_id: str,
    seconds: float | None = None,
    scale: str | None = None,
    workers: int = 1,
) -> Path:
    """Copy a finished run (record and its artifacts) to ``results/<page>/<group>/``, adding the
    queue's provenance (plan id, scale, command, seconds; ``workers``: processes training at once,
    when more than one) and re-signing the record. Atomic (each file
    is written beside its place and renamed; the record last, so it never names a missing artifact)
    and idempotent (a run published already under this plan id is left as it is)."""
    out = results_dir() / page / record["group"]
    path = out / f"{record['key']}.json"
    old = read_record(path) if path.exists() else None
    if (
        old is not None
        and (old.get("queue") or {}).get("id") == item_id
        and old.get("checksum")
        and all((out / f"{record['key']}.{n}.npz").exists() for n in old.get("artifacts", {}))
    ):
        return path
    for name in record.get("artifacts", {}):
        src = next(p for p in artifact_paths(record, name) if p.exists())
        atomic_write(out / f"{record['key']}.{name}.npz", lambda tmp, src=src: shutil.copyfile(src, tmp))
    queue = {"id": item_id, "page": page, "command": " ".join(sys.argv), "seconds": seconds}
    if workers > 1:
        queue["workers"] = workers
    body = sign({**record, "queue": {**queue, "scale": scale} if scale else queue})
    atomic_write(path, lambda tmp: tmp.write_text(json.dumps(body, indent=1, sort_keys=True)))
    return path


def cannot_run(items: Sequence[Item], cfg: Mapping[str, Any]) -> str | None:
    """Why the planned ``items`` of one page must not train here, or ``None``: a page whose settings
    ask for ImageNet weights plans a run from scratch where the weights are missing (PACS without
    ``.weights``), and the home side would refuse that record."""
    if cfg.get("pretrained") and any(getattr(it.config, "pretrained", True) is False for it in items):
        return (
            "its settings ask for ImageNet weights, which are not on this machine, so its runs would train "
            "from scratch; carry .weights (python -m lib.nets.pretrained here; results/README.md)"
        )
    return None


def data_fingerprint(data: Any) -> str:
    """What identifies ``data`` in the records' keys: a bundle's fingerprint, or a data dict's tag."""
    if hasattr(data, "fingerprint"):
        return f"{getattr(data, 'name', '?')} {data.fingerprint()}"
    return str(data.get("tag", "?")) if isinstance(data, Mapping) else type(data).__name__


def load_data(
    items: Sequence[Item], scale: str, strict: bool = False, log: Log = print
) -> dict[tuple[str, str | None], Any]:
    """The data of every page (and target) of ``items``, by (page, target), each loaded once with a
    line saying its fingerprint. A page whose data is missing, or which :func:`cannot_run` here, is
    left out with a line, or, with ``strict`` (pages asked for by name), raises :class:`PageSkipped`."""
    out: dict[tuple[str, str | None], Any] = {}
    for key in dict.fromkeys((it.page, it.target) for it in items):
        page = get_page(key[0])
        cfg = config.settings(page.name, scale)
        why = cannot_run([it for it in items if (it.page, it.target) == key], cfg)
        if why is None:
            t0 = time.monotonic()
            try:
                out[key] = page.data(cfg, key[1])
            except FileNotFoundError as err:  # e.g. CivilComments where WILDS cannot be had
                why = str(err).splitlines()[0] + " (a call carries the packs of its pages: results/README.md)"
        if why is not None:
            if strict:
                raise PageSkipped(f"pages: {key[0]} cannot run here: {why}")
            log(f"skipped {key[0]}: {why}")
            continue
        where = f"{key[0]}{'/' + key[1] if key[1] else ''}"
        log(f"data {where}: {data_fingerprint(out[key])} ({time.monotonic() - t0:.0f} s)")
    return out


def _publish_finished(
    page: Any, batch: Sequence[Item], cfg: Any, data: Any, done: list[Path], finished: set[str], on_done: OnDone
) -> None:
    """Publish (``on_done``) every run of ``batch`` finished in the local cache (or under another page
    of ``results/``) that this page has not published yet: a call cut short loses nothing. Adds the
    plan ids of the runs of ``batch`` that are finished to ``finished``."""
    have = {(p.parent.parent.name, p.stem) for p in done}  # (page, key): pages may share a run
    with training(False):
        for it in batch:
            try:
                rec = page.run_one(it, cfg, data)
            except RunMissing:
                continue
            finished.add(it.id)
            if (it.page, rec["key"]) not in have:
                on_done(it, rec)
                have.add((it.page, rec["key"]))


def stack_cap(page: Any, stack: int | None, sizing: Bench | None) -> int | None:
    """The most runs of ``page`` trained at once as one stack: ``stack`` where given, else what the
    benchmark measured (``sizing.stack``) for a page it sizes, else no cap (``None``: the page's own)."""
    return stack if stack is not None or sizing is None or not page.bench else sizing.stack


def _train(
    page: Any,
    left: list[Item],
    cfg: Any,
    data: Any,
    stack: int | None,
    sizing: Bench | None,
    on_done: OnDone,
    finished: set[str],
    log: Log,
) -> None:
    """Train ``left`` (one page and target): in batches whose stacks end before the deadline when
    ``sizing`` covers the page (until none fits: the queue goes on to the next page), else all at once. Without ``stack``, stacks hold at most what the
    benchmark measured (``sizing.stack``: runs alone where no stack was measured). An out-of-memory
    error halves the stack; any other error of a stack of several runs is said in one line and the
    runs go on alone (the H200 benchmark's stacks raised while runs alone trained); an error of a
    run alone ends the call."""
    cap = stack_cap(page, stack, sizing)
    while left:
        batch, n = left, cap
        fit = fit_batch(left, sizing, page.bench, window_deadline.remaining(), cap) if sizing and page.bench else None
        if fit is not None:
            batch, n, secs = fit
            if not batch:  # the next page may still have a run that fits
                one = fit_batch(left[:1], sizing, page.bench, math.inf) or ([], 1, math.nan)
                log(
                    f"{page.name}: no run left fits the {window_deadline.remaining() / 60:.1f} min left; the next, "
                    f"{left[0].id}, takes ~{one[2] / 60:.1f} min: they are the next call's"
                )
                return
            log(f"{page.name}: {len(batch)} run(s) in packs of at most {n}, ~{secs / 60:.1f} min ({sizing.source})")
        try:
            packing = {"stack": n, "log": log, "compile": bool(sizing and sizing.compiled)} if page.packed else {}
            page.train(batch, cfg, data, on_done=on_done, **packing)
        except Exception as err:
            size, oom = n or len(batch), isinstance(err, RuntimeError) and "out of memory" in str(err).lower()
            # a run alone, the deadline, or a one-at-a-time page's run: the error is the run's
            if size <= 1 or isinstance(err, window_deadline.DeadlineReached) or not (oom or page.bench):
                raise
            cap = size // 2 if oom else 1
            log(
                f"{page.name}: out of memory in a pack of up to {size}: packs of {cap} from here"
                if oom
                else f"{page.name}: a pack of up to {size} failed ({error_line(err)}): runs alone from here"
            )
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            left = [it for it in left if it.id not in finished]
            continue
        left = [it for it in left if it not in batch and it.id not in finished]


def run_queue(
    pages: Sequence[str] = PAGES,
    minutes: float = 25.0,
    scale: str = "paper",
    stack: int | None = None,
    log: Log = print,
    clock: Callable[[], float] = time.monotonic,
    deadline: float | None = None,
    strict: bool = False,
    published_out: list[Path] | None = None,
    data: Mapping[tuple[str, str | None], Any] | None = None,
    sizing: Bench | None = None,
    max_bytes: int | None = None,
    only: Collection[str] | None = None,
    workers: int = 1,
) -> list[Path]:
    """Train and publish the unfinished runs of ``pages`` in priority order by a hard deadline; return
    the published files.

    The deadline is ``deadline`` (on ``clock``) or ``minutes`` from now: no epoch starts that would
    end after it; what finished is published, an unfinished run keeps its checkpoint on this machine.
    Each page (and PACS target) trains as one grid, stacked ``stack`` runs at a time (``None``: the
    page's way), or, with ``sizing`` (a benchmark of this device), in batches whose stacks end in
    the time left. ``data`` holds what :func:`load_data` loaded (pages missing from it are skipped);
    without it each page's data is loaded here. A page that cannot run here is skipped with a
    message, or, with ``strict`` (pages asked for by name), raises :class:`PageSkipped`. Training
    stops once ``max_bytes`` are published (what a call can bring back). ``published_out`` (a list)
    receives each published path as it is written, so a caller keeps them when an error ends the call.
    ``only`` (plan ids): train only these runs (a worker's share, :mod:`calibook.gpu.window`, one of
    ``workers`` processes training at once; the records say so)."""
    if not isinstance(minutes, (int, float)) or isinstance(minutes, bool) or not math.isfinite(minutes) or minutes <= 0:
        raise ValueError(f"minutes: must be a positive number of minutes, got {minutes!r}")
    if stack is not None and (not isinstance(stack, int) or isinstance(stack, bool) or stack < 1):
        raise ValueError(f"stack: must be a positive integer (runs trained at once), got {stack!r}")
    at = deadline if deadline is not None else clock() + 60 * float(minutes)
    unplanned: dict[str, str] = {}
    todo = [it for it in plan(pages, scale, unplanned) if not it.done and (only is None or it.id in only)]
    for name, why in unplanned.items():
        if strict:
            raise PageSkipped(f"pages: {name} cannot be planned here: {why}")
        log(f"skipped {name}: {why}")
    if data is None:
        data = load_data(todo, scale, strict, log)
    done: list[Path] = published_out if published_out is not None else []
    first = len(done)
    with window_deadline.deadline(at, clock):
        try:
            for key in dict.fromkeys((it.page, it.target) for it in todo):
                if key not in data:
                    continue
                if max_bytes is not None and record_bytes(done[first:]) >= max_bytes:
                    raise window_deadline.DeadlineReached(
                        f"the call published {record_bytes(done[first:]) / 2**20:.1f} MiB, what it can bring back"
                    )
                window_deadline.check(0.0, "the queue")
                batch = [it for it in todo if (it.page, it.target) == key]  # the whole grid of the page
                page = get_page(key[0])
                cfg = config.settings(page.name, scale)
                started = time.monotonic()
                finished: set[str] = set()

                def on_done(it: Item, rec: dict[str, Any], started: float = started, finished: set = finished) -> None:
                    done.append(publish(rec, it.page, it.id, time.monotonic() - started, scale, workers))
                    finished.add(it.id)
                    log(f"published {it.id} -> {done[-1].relative_to(results_dir().parent)}")

                _publish_finished(page, batch, cfg, data[key], done, finished, on_done)
                left = [it for it in batch if it.id not in finished]
                _train(page, left, cfg, data[key], stack, sizing, on_done, finished, log)
                _publish_finished(page, batch, cfg, data[key], done, finished, on_done)  # e.g. another process's
        except window_deadline.DeadlineReached as stop:
            log(  # checkpoints are not exported: only a call that finds this machine warm can resume them
                f"deadline: {stop} (on this machine only: a call that finds it warm resumes the run, "
                "a fresh one starts it again)"
            )
    return done[first:]
