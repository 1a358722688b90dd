"""The paper-scale queue: every paper-scale run of the book, run a GPU window at a time.

``python -m lib paper [PAGE ...] [--minutes M] [--dry-run] [--scale S] [--import DIR]``

* :func:`plan` lists every run of the chosen pages at a scale (paper by default) in priority order:
  pages cifar10h, pacs (four targets), sensitivity, l2d_cifar10, losses_cifar10, civilcomments;
  inside them seed 0 of every method first, then the next seeds. (CivilComments needs the WILDS
  data and a DistilBERT on the machine that runs it; where they are missing the queue skips it.) Runs already in ``results/`` are marked done.
* :func:`run_queue` trains what is not done, stacked many at a time on one device
  (:func:`lib.moe_grid.train_stacked`), starting no stack after the deadline, and publishes every
  finished run at once (:func:`publish`): ``results/<page>/<group>/<key>.json`` (the verified record,
  with the command and seconds) and ``<key>.predictions.npz`` (float16 test predictions); never
  checkpoints or data. An interrupted window loses at most the runs in flight.
* :func:`import_results` copies results made by this queue elsewhere into ``results/`` after checking
  each record's checksum, artifact hashes, code version and config against today's plan.

Paper 1's pages train stacked; paper 2's and paper 4's CIFAR-10 runs (a WRN each) train one at a
time through the same runners their pages call (:func:`lib.experiments.l2d_cifar10.run_cifar`,
:func:`lib.experiments.reweighted.run_loss`), so a page finds them by key.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lib.config import repo_root, results_dir, settings
from lib.engine.runs import _canonical, artifact_paths, read_record, sha256_file, sign
from lib.engine.versions import code_version

PAGES: tuple[str, ...] = ("cifar10h", "sensitivity", "l2d_cifar10", "losses_cifar10", "civilcomments", "pacs")  # PACS last
PACS_TARGETS: tuple[str, ...] = ("photo", "art_painting", "cartoon", "sketch")
QUEUE_PAGES: tuple[str, ...] = ("cifar10h", "pacs", "sensitivity")  # stacked paper-1 pages (benchmarked)

__all__ = ["Item", "PAGES", "import_results", "matches", "plan", "publish", "published", "run_queue"]


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
    from lib.experiments import moe as exp

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
        from lib.experiments.moe_pacs import pacs_backbone

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
        from lib.experiments.l2d import EXPERIMENTS, grid
        from lib.experiments.l2d_cifar10 import cifar_config

        return [Item(page, f"{page}/{p['experiment']}/{p['value']}/{p['surrogate']}/s{p['seed']}", int(p["seed"]),
                     int(cfg["epochs"]), p["surrogate"], extra={"point": p, "config": cifar_config(**p, cfg=cfg)})
                for p in grid(cfg, EXPERIMENTS)]
    if page == "losses_cifar10":  # what the page trains: seed 0 of every loss and CSF, and the AU sweep
        from lib.experiments.reweighted import CSF_LOSSES, TABLE_LOSSES, loss_config

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
        if rec is not None and "queue" in rec and rec.get("version") == code_version(rec["group"]):
            out[rec["queue"]["id"]] = rec
    return out


def matches(item: Item, record: Mapping[str, Any]) -> bool:
    """Whether a published ``record`` is the run ``item`` plans: same plan id and same config (a run of
    another scale or of an older config with the same id does not count)."""
    if (record.get("queue") or {}).get("id") != item.id:
        return False
    if item.config is not None:
        return record.get("config", {}).get("train") == json.loads(_canonical(item.config.key()))
    want = item.extra.get("config")
    return want is None or {k: record.get("config", {}).get(k) for k in want} == json.loads(_canonical(want))


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


def _epoch_minutes() -> tuple[dict[str, float], str]:
    """Minutes per epoch by (page-like) dataset from the newest committed epoch benchmark, preferring
    a CUDA one; and the device it was measured on."""
    files = sorted((repo_root() / "bench" / "results").glob("epoch_*.json"), key=lambda p: "cuda" not in p.name)
    if not files:
        return {}, "no benchmark"
    bench = json.loads(files[0].read_text())
    per: dict[str, float] = {}
    for r in bench.get("results", []):
        per.setdefault(f"{r['name']}/{r['method']}", r["epoch_seconds"] / 60)
    return per, bench.get("device", files[0].name)


def projected_minutes(item: Item) -> float | None:
    """Training minutes of one run projected from the committed epoch benchmark (one run at a time)."""
    if item.page not in QUEUE_PAGES:
        return None  # no committed benchmark of the WRN / ResNet-50 trainings
    per, _ = _epoch_minutes()
    dataset = "pacs-224" if item.page == "pacs" else "cifar10h"
    v = per.get(f"{dataset}/{item.method}") or per.get(f"{dataset}/vanilla")
    return None if v is None else v * item.epochs


def describe(items: Sequence[Item]) -> str:
    """The plan as text: one line per page with runs done/left and projected minutes."""
    _, device = _epoch_minutes()
    lines = [f"projected from the committed epoch benchmark on {device} (one run at a time; stacking on a GPU "
             "runs several at once)"]
    for page in dict.fromkeys(it.page for it in items):
        its = [it for it in items if it.page == page]
        left = [it for it in its if not it.done]
        mins = [projected_minutes(it) for it in left]
        known = f"~{sum(m for m in mins if m is not None):9.1f} min" if any(m is not None for m in mins) else "  (no benchmark)"
        how = "stacked" if its[0].config is not None and page != "civilcomments" else "one at a time"
        lines.append(f"{page:15s} {len(its) - len(left):4d} done {len(left):4d} left  {known}  ({how})")
        if page == "pacs" and its[0].config is not None:  # which network, and never "pretrained" without weights
            c = its[0].config
            lines.append(f"    backbone {c.backbone} ({'pretrained' if c.pretrained else 'scratch'})")
        lines += [f"    {it.id}" for it in left[:3]] + ([f"    ... {len(left) - 3} more"] if len(left) > 3 else [])
    return "\n".join(lines)


def publish(record: dict[str, Any], page: str, item_id: str, seconds: float | None = None) -> Path:
    """Copy a finished run (record and its artifacts) to ``results/<page>/<group>/`` at once, adding
    the queue's provenance (plan id, command, seconds) and re-signing the record."""
    out = results_dir() / page / record["group"]
    out.mkdir(parents=True, exist_ok=True)
    for name in record.get("artifacts", {}):
        src = next(p for p in artifact_paths(record, name) if p.exists())
        shutil.copyfile(src, out / f"{record['key']}.{name}.npz")
    body = sign({**record, "queue": {"id": item_id, "page": page, "command": " ".join(sys.argv),
                                     "seconds": seconds}})
    path = out / f"{record['key']}.json"
    path.write_text(json.dumps(body, indent=1, sort_keys=True))
    return path


def _data_for(item: Item, scale: str) -> Any:
    from lib.experiments import moe as exp

    cfg = settings(item.page, scale)
    if item.page == "pacs":
        return _pacs_data(cfg, item.target)
    if item.page == "civilcomments":
        from lib.data.synthetic import synthetic_comments
        from lib.data.text import load_civilcomments

        if cfg["data"] == "synthetic":
            return synthetic_comments(n=cfg["n_train"], seed=0)
        return load_civilcomments(None, n_train=cfg["n_train"], seed=0)
    return exp.cifar10h_data(cfg)


def _pacs_data(cfg: dict[str, Any], target: str | None) -> Any:
    from lib.experiments.moe_pacs import pacs_backbone, pacs_data

    return pacs_data(cfg, target, pacs_backbone(cfg))  # as the pacs page does


_IMAGES: dict[tuple[str, str], Any] = {}


def _run_one(item: Item, scale: str) -> dict[str, Any]:
    """Train (or load) one run of the l2d_cifar10 or losses_cifar10 page exactly as the page does."""
    from lib.experiments.image_training import image_data

    cfg = settings(item.page, scale)
    if (item.page, scale) not in _IMAGES:
        _IMAGES.clear()  # one page's images at a time
        _IMAGES[(item.page, scale)] = image_data(cfg)
    data = _IMAGES[(item.page, scale)]
    if item.page == "l2d_cifar10":
        from lib.experiments.l2d_cifar10 import run_cifar

        p = item.extra["point"]
        return run_cifar(p["experiment"], p["value"], p["surrogate"], int(p["seed"]), cfg, data)
    from lib.experiments.reweighted import run_loss

    c = item.extra["config"]
    return run_loss(c["loss"], cfg, data, seed=item.seed, coverage=c["coverage"], nu=c["nu"])


def run_queue(pages: Sequence[str] = PAGES, minutes: float = 25.0, scale: str = "paper", stack: int = 8,
              log: Any = print) -> list[Path]:
    """Train and publish the unfinished runs of ``pages`` in priority order; start no new stack after
    ``minutes`` minus the projected length of one; return the published files."""
    from lib.moe_grid import train_stacked

    t_start = time.monotonic()
    deadline = t_start + 60 * float(minutes)
    todo = [it for it in plan(pages, scale) if not it.done]
    done: list[Path] = []
    while todo and time.monotonic() < deadline:
        if todo[0].config is None:  # paper 2 / paper 4 runs: one at a time through their page's runner
            it = todo.pop(0)
            started = time.monotonic()
            done.append(publish(_run_one(it, scale), it.page, it.id, seconds=time.monotonic() - started))
            log(f"published {it.id} -> {done[-1].relative_to(results_dir().parent)}")
            continue
        seed = todo[0].seed
        key = (todo[0].page, todo[0].target)
        batch = [it for it in todo if (it.page, it.target) == key and it.seed == seed]
        try:
            data = _data_for(batch[0], scale)
        except FileNotFoundError as err:  # e.g. CivilComments where WILDS cannot be had: skip the page
            log(f"skipped {key[0]}: {err}")
            todo = [it for it in todo if it.page != key[0]]
            continue
        started = time.monotonic()

        def on_done(cfg: Any, rec: dict[str, Any]) -> None:
            it = next(i for i in batch if i.config == cfg)
            done.append(publish(rec, it.page, it.id, seconds=time.monotonic() - started))
            log(f"published {it.id} -> {done[-1].relative_to(results_dir().parent)}")

        text = getattr(data, "kind", "images") == "text"  # text trains one run at a time
        train_stacked([it.config for it in batch], data, stack=1 if text else stack, deadline=deadline, on_done=on_done)
        todo = [it for it in todo if it not in batch]
    return done


def import_results(folder: Path, scale: str = "paper") -> list[Path]:
    """Copy results produced by this project's queue elsewhere (``<page>/<group>/<key>.json`` with
    their ``.npz``) into ``results/``. Each record must verify (checksum, artifact hashes), carry a
    queue plan id, and match today's plan: same config for that id and the current code version;
    otherwise ``ValueError`` names the file and the reason, and nothing is copied."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"folder: {folder} is not a directory")
    today = {it.id: it for it in plan(PAGES, scale)}
    accepted: list[tuple[Path, dict[str, Any]]] = []
    for path in sorted(folder.glob("*/*/*.json")):
        rec = read_record(path)
        if rec is None:
            raise ValueError(f"{path}: damaged or unsigned record; not imported")
        qid = (rec.get("queue") or {}).get("id")
        if qid not in today:
            raise ValueError(f"{path}: not a run of today's plan (id {qid!r}); a foreign or renamed run")
        if rec.get("version") != code_version(rec["group"]):
            raise ValueError(f"{path}: stale: made by code version {rec.get('version')} of {rec['group']!r}, "
                             f"today's is {code_version(rec['group'])}")
        if not matches(today[qid], rec):
            raise ValueError(f"{path}: its config differs from today's config of {qid}")
        for name, meta in (rec.get("artifacts") or {}).items():
            art = path.with_name(f"{rec['key']}.{name}.npz")
            if not art.exists() or sha256_file(art) != meta["sha256"]:
                raise ValueError(f"{art}: missing or does not match the record's SHA-256")
        accepted.append((path, rec))
    copied = []
    for path, rec in accepted:
        out = results_dir() / rec["queue"]["page"] / rec["group"]
        out.mkdir(parents=True, exist_ok=True)
        for f in path.parent.glob(f"{rec['key']}*"):
            shutil.copyfile(f, out / f.name)
            copied.append(out / f.name)
    return copied


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lib paper``: plan, run or import paper-scale results (see the module docstring)."""
    import argparse

    from lib.config import SCALES

    ap = argparse.ArgumentParser(prog="python -m lib paper", description="The paper-scale queue.")
    ap.add_argument("pages", nargs="*", default=list(PAGES), help=f"pages (default: all): {', '.join(PAGES)}")
    ap.add_argument("--minutes", type=float, default=25.0, help="start no new stack after this many minutes")
    ap.add_argument("--dry-run", action="store_true", help="print the plan with projected minutes")
    ap.add_argument("--scale", default="paper", choices=SCALES, help="smoke: a tiny end-to-end check")
    ap.add_argument("--stack", type=int, default=8, help="runs trained at once as one stacked model")
    ap.add_argument("--import", dest="import_dir", metavar="DIR", help="import results made elsewhere")
    args = ap.parse_args(argv)
    try:
        if args.import_dir:
            for p in import_results(Path(args.import_dir), args.scale):
                print(f"imported {p}")
            return 0
        items = plan(args.pages, args.scale)
        if args.dry_run:
            print(describe(items))
            return 0
        from lib.packs import unpack_all

        unpack_all()
        run_queue(args.pages, args.minutes, args.scale, args.stack)
        print(describe(plan(args.pages, args.scale)))
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0
