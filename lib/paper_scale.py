"""Paper-scale results on the pages: what the queue has published, how much of the plan it covers,
and whether a page reads results or trains.

The paper-scale runs are trained on a GPU by the queue (:mod:`lib.gpu.queue`) a window at a time and
published to ``results/<page>/``. A page at ``scale="paper"`` reads them and trains nothing unless
its ``train`` parameter says so (:func:`should_train`); every page at a smaller scale also shows the
published paper-scale table beside its own (:func:`moe_section`, :func:`records`), with "k of n
seeds" for each method while the plan is only partly done (:func:`coverage`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from lib.validation import check_choice

TRAIN_CHOICES: tuple[str, ...] = ("auto", "yes", "no")

__all__ = ["TRAIN_CHOICES", "coverage", "coverage_cell", "l2d_section", "losses_section", "moe_section", "none_yet",
           "paper_section", "records", "require", "require_complete", "should_train", "sweep_section"]


def should_train(train: str, scale: str) -> bool:
    """A page's ``train`` parameter: ``"auto"`` trains below paper scale and only reads published
    results at paper scale (a GPU's work); ``"yes"`` trains what is missing; ``"no"`` never trains."""
    from lib.config import SCALES

    check_choice(train, TRAIN_CHOICES, "train")
    check_choice(scale, SCALES, "scale")
    return train == "yes" or (train == "auto" and scale != "paper")


def _plan(page: str, scale: str, target: str | None) -> tuple[list[Any], dict[str, dict[str, Any]]]:
    """The planned runs of ``page`` (and ``target``) at ``scale`` and the published records that
    are those runs (same plan id and config), by plan id."""
    from lib.gpu.queue import PAGES, plan

    check_choice(page, PAGES, "page")
    items = [it for it in plan([page], scale) if target is None or it.target == target]
    return items, {it.id: it.record for it in items if it.record is not None}


def records(page: str, target: str | None = None, scale: str = "paper") -> list[dict[str, Any]]:
    """The verified records the queue published for ``page`` (and PACS ``target``) at ``scale``,
    in plan order; records of older code versions are left out."""
    items, got = _plan(page, scale, target)
    return [got[it.id] for it in items if it.id in got]


def coverage(page: str, target: str | None = None, scale: str = "paper") -> pd.DataFrame:
    """One row per method of the plan: runs published of runs planned, as ``"k of n seeds"``
    (``"k of n runs"`` for pages whose runs are not seeds of one method)."""
    return _coverage(page, *_plan(page, scale, target))


def _coverage(page: str, items: Sequence[Any], got: Mapping[str, Any]) -> pd.DataFrame:
    rows: dict[str, dict[str, Any]] = {}
    for it in items:
        row = rows.setdefault(it.method, {"method": it.method, "published": 0, "planned": 0})
        row["planned"] += 1
        row["published"] += it.id in got
    unit = "seeds" if page in ("cifar10h", "pacs", "civilcomments") else "runs"
    out = pd.DataFrame(list(rows.values()), columns=["method", "published", "planned"])
    out["coverage"] = [f"{k} of {n} {unit}" for k, n in zip(out["published"], out["planned"])]
    return out


def coverage_cell(page: str, reading: bool, scale: str, target: str | None = None) -> pd.DataFrame | str:
    """A page's "how much of the plan" cell: when it reads published runs (``reading``), the
    :func:`coverage` table at its ``scale``, published as ``coverage`` (method -> "k of n");
    otherwise (it trained) a sentence, and ``coverage`` is published empty."""
    from lib.report import publish

    if not reading:
        publish("coverage", {})
        return "Every run above was trained (or loaded from the local cache) at this scale."
    cov = coverage(page, target, scale)
    publish("coverage", dict(zip(cov["method"], cov["coverage"])))
    return cov


def _how(page: str) -> str:
    return (f"They are trained on a GPU by `python -m lib paper {page}` and published a run at a time "
            "(see results/README.md); nothing on this page is extrapolated to paper scale.")


def none_yet(page: str) -> str:
    """What a page says when no paper-scale result of it is published yet."""
    return f"No paper-scale results for this page are in results/{page}/ yet. {_how(page)}"


def require(found: Sequence[Any], page: str) -> None:
    """Stop a page that read results (``train`` off) and found none: ``ValueError`` with
    :func:`none_yet`'s sentence and how to train the runs instead."""
    if not found:
        raise ValueError(f"train: {none_yet(page)} To train them here instead, pass -p train yes.")


def require_complete(page: str, scale: str = "paper") -> None:
    """Stop a page that reads results (``train`` off) unless every planned run of it is published
    (pages whose figures need the whole sweep): ``ValueError`` with the runs published per method."""
    cov = coverage(page, scale=scale)
    if (cov["published"] < cov["planned"]).any():
        have = "; ".join(f"{m}: {c}" for m, c in zip(cov["method"], cov["coverage"]))
        raise ValueError(f"train: this page needs every planned run and results/{page}/ holds {have}. "
                         f"{_how(page)} To train the missing runs here, pass -p train yes.")


def _with_mocae(recs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Records plus, for each Vanilla MoE record, the MoCaE record it carries
    (:func:`lib.moe.train.mocae_view`: MoCaE recalibrates the Vanilla network post hoc, so the
    queue publishes it inside the Vanilla record)."""
    from lib.moe.train import mocae_view

    return [*map(dict, recs), *({**r, **mocae_view(r)} for r in recs
                                if r.get("method") == "vanilla" and r.get("metrics", {}).get("mocae"))]


def moe_section(page: str, target: str | None = None, scale: str = "paper") -> pd.DataFrame | str:
    """Paper 1's table (:func:`lib.moe.tables.paper_table` layout, mean ± SE over the published
    seeds) from the published paper-scale runs of ``page``, with a ``coverage`` column
    ("k of 5 seeds"), or :func:`none_yet`'s sentence when nothing is published."""
    return _moe_table(page, *_plan(page, scale, target))


def _moe_table(page: str, items: Sequence[Any], got: Mapping[str, Any]) -> pd.DataFrame | str:
    from lib.moe import experiment as exp
    from lib.moe import tables

    recs = [got[it.id] for it in items if it.id in got]
    if not recs:
        return none_yet(page)
    table = tables.paper_table(tables.summarize(tables.results_frame(_with_mocae(recs))))
    cov = _coverage(page, items, got).set_index("method")["coverage"]
    labels = {exp.METHOD_LABELS[m]: m for m in exp.METHOD_LABELS}
    table["coverage"] = [cov.get(labels.get(lbl, ""), cov.get("vanilla", "")) for lbl in table["Method"]]
    return table.drop(columns=["seeds"])


def sweep_section(page: str = "sensitivity", scale: str = "paper") -> pd.DataFrame | str:
    """The sensitivity sweeps (Figs. E.7, E.8) from the published paper-scale runs: one row per
    (method, lambda, warmup) with hard ECE and overall accuracy as mean ± SE and the seeds published
    of those planned, or :func:`none_yet`'s sentence when nothing is published."""
    return _sweep_table(page, *_plan(page, scale, None))


def _sweep_table(page: str, items: Sequence[Any], got: Mapping[str, Any]) -> pd.DataFrame | str:
    from lib.moe import experiment as exp
    from lib.moe import tables

    recs = [got[it.id] for it in items if it.id in got]
    if not recs:
        return none_yet(page)
    by = ("method", "lam", "warmup_epochs")
    summ = tables.summarize(tables.results_frame(recs), by=by)
    hard = summ[summ["subset"] == "hard"].set_index(list(by))
    overall = summ[summ["subset"] == "all"].set_index(list(by))
    planned = pd.Series([(it.config.method, it.config.lam, it.config.warmup_epochs) for it in items])
    rows = []
    for idx in hard.index:
        n = int((planned == idx).sum())
        rows.append({"method": exp.METHOD_LABELS.get(idx[0], idx[0]), "lambda": idx[1], "warmup": idx[2],
                     "hard ECE": tables.fmt(hard.loc[idx, "ece"], hard.loc[idx, "ece_se"]),
                     "accuracy": tables.fmt(overall.loc[idx, "accuracy"], overall.loc[idx, "accuracy_se"])
                     if idx in overall.index else "—",
                     "coverage": f"{int(hard.loc[idx, 'seeds'])} of {n} seeds"})
    return pd.DataFrame(rows)


def l2d_section(page: str = "l2d_cifar10", scale: str = "paper") -> pd.DataFrame | str:
    """Paper 2's sweeps from the published paper-scale runs: per (experiment, value, surrogate) the
    expert ECE, system accuracy and the random expert's ECE (mean over published seeds, as
    :func:`lib.l2d.results.summarize`) with the runs published of those planned."""
    return _l2d_table(page, *_plan(page, scale, None))


def _l2d_table(page: str, items: Sequence[Any], got: Mapping[str, Any]) -> pd.DataFrame | str:
    from lib.l2d import results as l2d_results
    from lib.l2d.record import L2DRecord

    rows = [l2d_results.result_row(it.extra["point"], L2DRecord.from_record(got[it.id]))
            for it in items if it.id in got]
    if not rows:
        return none_yet(page)
    table = l2d_results.summarize(pd.DataFrame(rows), metrics=["ece", "system_accuracy", "ece_random_expert"])
    planned = pd.DataFrame([it.extra["point"] for it in items]).groupby(["experiment", "value", "surrogate"]).size()
    table["coverage"] = [f"{int(n)} of {int(planned.loc[(e, v, s)])} runs"
                         for e, v, s, n in zip(table["experiment"], table["value"], table["surrogate"], table["seeds"])]
    return table[["experiment", "value", "surrogate", "ece", "system_accuracy", "ece_random_expert", "coverage"]]


def losses_section(page: str = "losses_cifar10", scale: str = "paper") -> pd.DataFrame | str:
    """Paper 4's Table 1/2 layout (:func:`lib.rr.experiment.loss_table`, x100) from the
    published paper-scale runs of each compared loss, or :func:`none_yet`'s sentence; a ``runs``
    column says how many of the page's planned runs (losses, confidence scores, the AU sweep) are in."""
    return _losses_table(page, *_plan(page, scale, None))


def _losses_table(page: str, items: Sequence[Any], got: Mapping[str, Any]) -> pd.DataFrame | str:
    from lib.rr import experiment as rx
    from lib.rr.record import LossRecord

    metrics = {it.method: LossRecord.from_record(got[it.id]).metrics for it in items
               if it.method in rx.TABLE_LOSSES and it.id in got}
    if not metrics:
        return none_yet(page)
    table = rx.loss_table(metrics)
    table["runs"] = f"{len(got)} of {len(items)} runs of the page"
    return table


_TABLES = {"cifar10h": _moe_table, "pacs": _moe_table, "civilcomments": _moe_table, "sensitivity": _sweep_table,
           "l2d_cifar10": _l2d_table, "losses_cifar10": _losses_table}


def paper_section(page: str, page_scale: str, target: str | None = None) -> pd.DataFrame | str:
    """A page's "Paper scale" section: below paper scale, the table of its published paper-scale runs
    (:func:`moe_section`, :func:`sweep_section`, :func:`l2d_section` or :func:`losses_section`);
    at paper scale, a sentence (the page's own tables are those). Publishes ``paper_scale_runs``."""
    from lib.report import publish

    items, got = _plan(page, "paper", target)
    publish("paper_scale_runs", len(got))
    if page_scale == "paper":
        return "This page ran at paper scale: the tables above are the paper-scale ones."
    return _TABLES[page](page, items, got)
