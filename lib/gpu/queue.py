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

Paper 1's pages train stacked; paper 2's and paper 4's CIFAR-10 runs (a WRN each) train one at a
time through the same runners their pages call (:func:`lib.l2d.cifar10.run_cifar`,
:func:`lib.rr.experiment.run_loss`), so a page finds them by key.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lib.config import results_dir, settings
from lib.engine import deadline as window_deadline
from lib.engine.runs import artifact_paths, atomic_write, read_record, sign, training
from lib.engine.versions import made_by_current_code

#: Priority order -- paper 1's CIFAR-10H and its sensitivity sweeps first, PACS last (issue 23).
PAGES: tuple[str, ...] = ("cifar10h", "sensitivity", "l2d_cifar10", "losses_cifar10", "civilcomments", "pacs")
PACS_TARGETS: tuple[str, ...] = ("photo", "art_painting", "cartoon", "sketch")
QUEUE_PAGES: tuple[str, ...] = ("cifar10h", "pacs", "sensitivity")  # stacked paper-1 pages (benchmarked)

__all__ = ["Item", "PAGES", "PageSkipped", "describe", "import_results", "matches", "plan", "publish", "published",
           "read_record", "run_queue"]


class PageSkipped(ValueError):
    """A page the queue was asked for by name cannot run here (its data is missing)."""


def _plain(obj: Any) -> Any:
    """``obj`` as the plain JSON types a record holds once read back (keys sorted, tuples as lists)."""
    return json.loads(json.dumps(obj, sort_keys=True, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))


@dataclass
class Item:
    """One planned run: the page it belongs to, an id unique in the plan, its seed, epochs and, for
    paper-1 pages, its TrainConfig and the PACS target; for the others, ``extra["config"]`` (the
    part of the run's config known before the data is loaded) and, for L2D, ``extra["point"]``."""

    page: str
    id: str
    seed: int
    epochs: int
    method: str
    config: Any = None
    target: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    record: dict[str, Any] | None = None  # its published record (set by plan), if any

    @property
    def done(self) -> bool:
        """Whether the run is published in ``results/`` (same plan id and config)."""
        return self.record is not None


def _moe_items(page: str, scale: str) -> list[Item]:
    from lib.moe import experiment as exp

    cfg = settings(page, scale)
    items: list[Item] = []
    if page == "sensitivity":
        cfgs = [*exp.train_configs(cfg, methods=["vanilla"]),
                *[c.replace(lam=float(lam)) for lam in cfg["lams"]
                  for c in exp.train_configs(cfg, methods=["robust"], warmup_epochs=cfg["warmup"])],
                *[c.replace(warmup_epochs=int(w)) for w in cfg["warmups"]
                  for c in exp.train_configs(cfg, methods=["robust"], lam=cfg["lam"])]]
        targets: Sequence[str | None] = [None]
    else:
        from lib.moe.pacs import pacs_backbone

        pre = pacs_backbone(cfg).train_changes() if page == "pacs" else {}  # as the pacs page does
        if page == "civilcomments" and cfg["backbone"] == exp.TINY_TEXT:  # smoke: as the page does
            pre = {"backbone": "text:" + exp.tiny_text_model()}
        cfgs = [c for c in exp.train_configs(cfg, **pre) if c.method != "mocae"]  # MoCaE comes with Vanilla
        targets = PACS_TARGETS if page == "pacs" else [None]
    for t in targets:
        for c in cfgs:
            tag = f"{page}{'/' + t if t else ''}/{c.method}/lam{c.lam}/w{c.warmup}/s{c.seed}"
            if all(it.id != tag for it in items):  # the sweeps of the sensitivity page share a point
                items.append(Item(page, tag, c.seed, c.epochs, c.method, config=c, target=t))
    return items


def _page_items(page: str, scale: str) -> list[Item]:
    cfg = settings(page, scale)
    if page == "l2d_cifar10":
        from lib.l2d.experiment import EXPERIMENTS, grid
        from lib.l2d.cifar10 import cifar_config

        return [Item(page, f"{page}/{p['experiment']}/{p['value']}/{p['surrogate']}/s{p['seed']}", int(p["seed"]),
                     int(cfg["epochs"]), p["surrogate"], extra={"point": p, "config": cifar_config(**p, cfg=cfg)})
                for p in grid(cfg, EXPERIMENTS)]
    if page == "losses_cifar10":  # what the page trains: seed 0 of every loss and CSF, and the AU sweep
        from lib.rr.experiment import CSF_LOSSES, TABLE_LOSSES, loss_config

        runs = [(loss_config(name, cfg), name) for name in dict.fromkeys([*TABLE_LOSSES, *CSF_LOSSES])]
        runs += [(loss_config("au", cfg, coverage=float(k), nu=float(v)), "au (coverage / nu sweep)")
                 for k in cfg["coverages"] for v in cfg["nus"]
                 if (float(k), float(v)) != (float(cfg["coverage"]), float(cfg["nu"]))]
        return [Item(page, f"{page}/{c['loss']}/k{c['coverage']}/nu{c['nu']}/s0", 0, int(cfg["epochs"]), label,
                     extra={"config": c}) for c, label in runs]
    return _moe_items(page, scale)


def published(page: str) -> dict[str, dict[str, Any]]:
    """Verified records under ``results/<page>/`` by their plan id (records of older code versions
    are left out: their runs are planned again)."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted((results_dir() / page).glob("*/*.json")):
        rec = read_record(path)
        if rec is not None and "queue" in rec and made_by_current_code(rec):
            out[rec["queue"]["id"]] = rec
    return out


def matches(item: Item, record: Mapping[str, Any]) -> bool:
    """Whether a published ``record`` is the run ``item`` plans: same plan id and same config (a run of
    another scale or of an older config with the same id does not count)."""
    if (record.get("queue") or {}).get("id") != item.id:
        return False
    if item.config is not None:
        return record.get("config", {}).get("train") == _plain(item.config.key())
    want = item.extra.get("config")
    return want is None or {k: record.get("config", {}).get(k) for k in want} == _plain(want)


def plan(pages: Sequence[str] = PAGES, scale: str = "paper") -> list[Item]:
    """Every run of ``pages`` at ``scale`` in priority order (page order, then seed by seed), each
    holding its published record (``record``; ``done``) when ``results/`` has it."""
    for p in pages:
        if p not in PAGES:
            raise ValueError(f"pages: unknown page {p!r}; the queue knows {', '.join(PAGES)}")
    items: list[Item] = []
    for p in [p for p in PAGES if p in pages]:
        got = published(p)
        page_items = _page_items(p, scale)
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
    if old is not None and (old.get("queue") or {}).get("id") == item_id and old.get("checksum") and all(
            (out / f"{record['key']}.{n}.npz").exists() for n in old.get("artifacts", {})):
        return path
    for name in record.get("artifacts", {}):
        src = next(p for p in artifact_paths(record, name) if p.exists())
        atomic_write(out / f"{record['key']}.{name}.npz", lambda tmp, src=src: shutil.copyfile(src, tmp))
    body = sign({**record, "queue": {"id": item_id, "page": page, "command": " ".join(sys.argv),
                                     "seconds": seconds}})
    atomic_write(path, lambda tmp: tmp.write_text(json.dumps(body, indent=1, sort_keys=True)))
    return path


def _data_for(item: Item, scale: str) -> Any:
    from lib.moe import experiment as exp

    cfg = settings(item.page, scale)
    if item.page == "pacs":
        from lib.moe.pacs import pacs_backbone, pacs_data

        return pacs_data(cfg, item.target, pacs_backbone(cfg))  # as the pacs page does
    if item.page == "civilcomments":
        from lib.data.locate import DataNotFoundError
        from lib.moe.civilcomments import load_data

        data, why = load_data(cfg)  # as the civilcomments page does
        if data is None:
            raise DataNotFoundError(why)
        return data
    return exp.cifar10h_data(cfg)


_IMAGES: dict[tuple[str, str], Any] = {}


def _run_one(item: Item, scale: str) -> dict[str, Any]:
    """Train (or load) one run of the l2d_cifar10 or losses_cifar10 page exactly as the page does."""
    from lib.nets.image_training import image_data

    cfg = settings(item.page, scale)
    if (item.page, scale) not in _IMAGES:
        _IMAGES.clear()  # one page's images at a time
        _IMAGES[(item.page, scale)] = image_data(cfg)
    data = _IMAGES[(item.page, scale)]
    if item.page == "l2d_cifar10":
        from lib.l2d.cifar10 import run_cifar

        p = item.extra["point"]
        return run_cifar(p["experiment"], p["value"], p["surrogate"], int(p["seed"]), cfg, data)
    from lib.rr.experiment import run_loss

    c = item.extra["config"]
    return run_loss(c["loss"], cfg, data, seed=item.seed, coverage=c["coverage"], nu=c["nu"])


def _publish_finished(batch: Sequence[Item], data: Any, started: float, done: list[Path], log: Any) -> None:
    """Publish every run of ``batch`` finished in the local cache (or under another page of
    ``results/``) that this page has not published yet: a window cut short loses nothing."""
    from lib.engine.runs import RunMissing
    from lib.moe.train import train_run

    have = {(p.parent.parent.name, p.stem) for p in done}  # (page, key): pages may share a run
    with training(False):
        for it in batch:
            try:
                rec = train_run(it.config, data)
            except RunMissing:
                continue
            if (it.page, rec["key"]) in have:
                continue
            done.append(publish(rec, it.page, it.id, seconds=time.monotonic() - started))
            have.add((it.page, rec["key"]))
            log(f"published {it.id} -> {done[-1].relative_to(results_dir().parent)}")


def run_queue(pages: Sequence[str] = PAGES, minutes: float = 25.0, scale: str = "paper", stack: int | None = None,
              log: Any = print, clock: Any = time.monotonic, deadline: float | None = None,
              strict: bool = False, published_out: list[Path] | None = None) -> list[Path]:
    """Train and publish the unfinished runs of ``pages`` in priority order by a hard deadline; return
    the published files.

    The deadline is ``deadline`` (on ``clock``) or ``minutes`` from now: no epoch starts that would
    end after it (:mod:`lib.engine.deadline`); what finished is published, every unfinished run keeps
    its checkpoint and the next call resumes. Each page (and PACS target) trains as one grid,
    stacked ``stack`` runs at a time (``None``: as many as the device holds). A page whose data is
    missing is skipped with a message, or, with ``strict`` (pages asked for by name), raises
    :class:`PageSkipped`. ``published_out`` (a list) receives each published path as it is written,
    so a caller keeps them when an error ends the window."""
    from lib.moe.grid import train_stacked

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
                if todo[0].config is None:  # paper 2 / paper 4 runs: one at a time through their page's runner
                    it = todo.pop(0)
                    started = time.monotonic()
                    try:
                        rec = _run_one(it, scale)
                    except FileNotFoundError as err:  # its data is not on this machine
                        if strict:
                            raise PageSkipped(f"pages: {it.page} cannot run here: {err}") from None
                        log(f"skipped {it.page}: {err}")
                        todo = [i for i in todo if i.page != it.page]
                        continue
                    done.append(publish(rec, it.page, it.id, seconds=time.monotonic() - started))
                    log(f"published {it.id} -> {done[-1].relative_to(results_dir().parent)}")
                    continue
                key = (todo[0].page, todo[0].target)
                batch = [it for it in todo if (it.page, it.target) == key]  # the whole grid of the page
                try:
                    data = _data_for(batch[0], scale)
                except FileNotFoundError as err:  # e.g. CivilComments where WILDS cannot be had
                    if strict:
                        raise PageSkipped(f"pages: {key[0]} cannot run here: {err}") from None
                    log(f"skipped {key[0]}: {err}")
                    todo = [it for it in todo if it.page != key[0]]
                    continue
                started = time.monotonic()
                _publish_finished(batch, data, started, done, log)  # finished before, not yet published

                def on_done(cfg: Any, rec: dict[str, Any], batch: list[Item] = batch, started: float = started) -> None:
                    it = next(i for i in batch if i.config == cfg)
                    done.append(publish(rec, it.page, it.id, seconds=time.monotonic() - started))
                    log(f"published {it.id} -> {done[-1].relative_to(results_dir().parent)}")

                text = getattr(data, "kind", "images") == "text"  # text trains one run at a time
                train_stacked([it.config for it in batch], data, stack=1 if text else stack, on_done=on_done, log=log)
                _publish_finished(batch, data, started, done, log)  # e.g. runs of another process
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
