"""The paper-scale queue: every paper-scale run of the book, run a GPU window at a time.

``python -m lib paper [PAGE ...] [--minutes M] [--dry-run] [--export F.tgz] [--import F.tgz|DIR]``
(the command line and the window around it: :mod:`lib.gpu.window`).

* :func:`plan` lists every run of the chosen pages at a scale (paper by default) in priority order:
  pages cifar10h, sensitivity, l2d_cifar10, losses_cifar10, civilcomments, pacs (four targets; last);
  inside them seed 0 of every method first, then the next seeds. (CivilComments needs the WILDS
  data and a DistilBERT on the machine that runs it.) Runs already in ``results/`` are marked done.
* :func:`run_queue` trains what is not done: the whole grid of a page (and PACS target) at once,
  in as few stacks as the device holds (:func:`lib.moe.grid.train_stacked`), under a hard deadline
  (:mod:`lib.engine.deadline`: no epoch starts that would end after it; every run resumes from its
  checkpoint on the next call), and publishes every finished run at once (:func:`publish`):
  ``results/<page>/<group>/<key>.json`` (the verified record, with the command and seconds) and
  ``<key>.<artifact>.npz``; never checkpoints or data. Runs finished in the local cache but not
  yet in ``results/`` (a window cut short) are published on the next call.
* :func:`import_results` copies results made by this queue elsewhere (a folder or a ``.tgz``) into
  ``results/`` after checking each record's checksum, artifact hashes, code version and config
  against today's plan.

The queue knows no page: it loops over the registry's pages (:func:`lib.pages.queued`), each
:class:`~lib.page.Page` giving its plan, data and how its grid trains (paper 1's pages stacked,
paper 2's and paper 4's WRN runs one at a time), the same definitions its notebook reads, so a page
finds the queue's runs by key.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lib.config import results_dir
from lib.engine import deadline as window_deadline
from lib.engine.plan import Item, matches
from lib.engine.runs import artifact_paths, atomic_write, read_record, sign, training
from lib.engine.versions import made_by_current_code
from lib.page import Page
from lib.pages import get as get_page
from lib.pages import queued_names

#: Priority order -- paper 1's CIFAR-10H and its sensitivity sweeps first, PACS last (issue 23):
#: the pages' ``rank`` (:func:`lib.pages.queued`).
PAGES: tuple[str, ...] = queued_names()

__all__ = [
    "Item",
    "PAGES",
    "PageSkipped",
    "describe",
    "import_results",
    "matches",
    "plan",
    "publish",
    "published",
    "read_record",
    "run_queue",
]


class PageSkipped(ValueError):
    """A page the queue was asked for by name cannot run here (its data is missing)."""


def published(page: str) -> dict[str, dict[str, Any]]:
    """Verified records under ``results/<page>/`` by their plan id (records of older code versions
    are left out: their runs are planned again)."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted((results_dir() / page).glob("*/*.json")):
        rec = read_record(path)
        if rec is not None and "queue" in rec and made_by_current_code(rec):
            out[rec["queue"]["id"]] = rec
    return out


def plan(pages: Sequence[str] = PAGES, scale: str = "paper") -> list[Item]:
    """Every run of ``pages`` at ``scale`` in priority order (page order, then seed by seed), each
    holding its published record (``record``; ``done``) when ``results/`` has it."""
    for p in pages:
        if p not in PAGES:
            raise ValueError(f"pages: unknown page {p!r}; the queue knows {', '.join(PAGES)}")
    items: list[Item] = []
    for p in [p for p in PAGES if p in pages]:
        got = published(p)
        page_items = get_page(p).plan(scale)
        for it in page_items:
            rec = got.get(it.id)
            it.record = rec if rec is not None and matches(it, rec) else None
        items += sorted(page_items, key=lambda it: it.seed)  # stable: seed 0 of everything first
    return items


def describe(items: Sequence[Item]) -> str:
    """The plan as text with projected GPU-minutes and windows per page (:func:`lib.gpu.projection.describe`)."""
    from lib.gpu.projection import describe as _describe

    return _describe(items)


def publish(record: dict[str, Any], page: str, item_id: str, seconds: float | None = None) -> Path:
    """Copy a finished run (record and its artifacts) to ``results/<page>/<group>/``, adding the
    queue's provenance (plan id, command, seconds) and re-signing the record. Atomic (each file is
    written beside its place and renamed; the record last, so it never names a missing artifact) and
    idempotent (a run published already under this plan id is left as it is)."""
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
    body = sign({**record, "queue": {"id": item_id, "page": page, "command": " ".join(sys.argv), "seconds": seconds}})
    atomic_write(path, lambda tmp: tmp.write_text(json.dumps(body, indent=1, sort_keys=True)))
    return path


def _publish_finished(
    page: Page, batch: Sequence[Item], cfg: Any, data: Any, started: float, done: list[Path], log: Any
) -> set[str]:
    """Publish every run of ``batch`` finished in the local cache (or under another page of
    ``results/``) that this page has not published yet: a window cut short loses nothing. Returns
    the plan ids of the runs of ``batch`` that are finished."""
    from lib.engine.runs import RunMissing

    have = {(p.parent.parent.name, p.stem) for p in done}  # (page, key): pages may share a run
    finished: set[str] = set()
    with training(False):
        for it in batch:
            try:
                rec = page.run_one(it, cfg, data)
            except RunMissing:
                continue
            finished.add(it.id)
            if (it.page, rec["key"]) in have:
                continue
            done.append(publish(rec, it.page, it.id, seconds=time.monotonic() - started))
            have.add((it.page, rec["key"]))
            log(f"published {it.id} -> {done[-1].relative_to(results_dir().parent)}")
    return finished


def run_queue(
    pages: Sequence[str] = PAGES,
    minutes: float = 25.0,
    scale: str = "paper",
    stack: int | None = None,
    log: Any = print,
    clock: Any = time.monotonic,
    deadline: float | None = None,
    strict: bool = False,
    published_out: list[Path] | None = None,
) -> list[Path]:
    """Train and publish the unfinished runs of ``pages`` in priority order by a hard deadline; return
    the published files.

    The deadline is ``deadline`` (on ``clock``) or ``minutes`` from now: no epoch starts that would
    end after it (:mod:`lib.engine.deadline`); what finished is published, every unfinished run keeps
    its checkpoint and the next call resumes. Each page (and PACS target) trains as one grid,
    stacked ``stack`` runs at a time (``None``: as many as the device holds). A page whose data is
    missing is skipped with a message, or, with ``strict`` (pages asked for by name), raises
    :class:`PageSkipped`. ``published_out`` (a list) receives each published path as it is written,
    so a caller keeps them when an error ends the window."""
    if not isinstance(minutes, (int, float)) or isinstance(minutes, bool) or not math.isfinite(minutes) or minutes <= 0:
        raise ValueError(f"minutes: must be a positive number of minutes, got {minutes!r}")
    if stack is not None and (not isinstance(stack, int) or isinstance(stack, bool) or stack < 1):
        raise ValueError(f"stack: must be a positive integer (runs trained at once), got {stack!r}")
    at = deadline if deadline is not None else clock() + 60 * float(minutes)
    todo = [it for it in plan(pages, scale) if not it.done]
    done: list[Path] = published_out if published_out is not None else []
    first = len(done)
    with window_deadline.deadline(at, clock):
        try:
            while todo:
                window_deadline.check(0.0, "the queue")
                key = (todo[0].page, todo[0].target)
                batch = [it for it in todo if (it.page, it.target) == key]  # the whole grid of the page
                page = get_page(key[0])
                cfg = page.settings(scale)
                try:
                    data = page.data(cfg, key[1])
                except FileNotFoundError as err:  # e.g. CivilComments where WILDS cannot be had
                    if strict:
                        raise PageSkipped(f"pages: {key[0]} cannot run here: {err}") from None
                    log(f"skipped {key[0]}: {err}")
                    todo = [it for it in todo if it.page != key[0]]
                    continue
                started = time.monotonic()
                finished = _publish_finished(page, batch, cfg, data, started, done, log)  # before, not yet published
                left = [it for it in batch if it.id not in finished]

                def on_done(it: Item, rec: dict[str, Any], started: float = started) -> None:
                    done.append(publish(rec, it.page, it.id, seconds=time.monotonic() - started))
                    log(f"published {it.id} -> {done[-1].relative_to(results_dir().parent)}")

                page.train(left, cfg, data, stack=stack, on_done=on_done, log=log)
                _publish_finished(page, batch, cfg, data, started, done, log)  # e.g. runs of another process
                todo = [it for it in todo if it not in batch]
        except window_deadline.DeadlineReached as stop:
            log(f"deadline: {stop}")
    return done[first:]


def import_results(folder: Path, scale: str = "paper") -> list[Path]:
    """Take in results made by this queue elsewhere, a folder or a ``.tgz`` (:func:`lib.gpu.transfer.import_results`)."""
    from lib.gpu.transfer import import_results as _import

    return _import(folder, scale)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lib paper``: see :func:`lib.gpu.window.main`."""
    from lib.gpu.window import main as window_main

    return window_main(argv)
