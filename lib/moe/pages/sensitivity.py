"""The sensitivity page (``notebooks/sensitivity.py``): paper 1's Figures E.7, E.8 and Table 5.

Everything that is this page: the run grid (:func:`run_plan`: Robust MoE per lambda at a fixed
warmup and per warmup at a fixed lambda, plus Vanilla MoE as the ERM reference), the sweeps' tables
and published numbers, Table 5 from the trained models (:func:`support_frame`), the paper's Table 5
(:data:`PAPER_TABLE5`) and the claims (:func:`claims`), gated by the book's accuracy
floor against the CIFAR-10H page's reference accuracy."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from lib import report
from lib.engine.plan import Item
from lib.moe import experiment as exp
from lib.moe import paper as paper_text
from lib.moe import robust
from lib.moe.claims import MARGIN, diff_text, gate, seed_diff
from lib.moe.methods import WARMUP_METHODS
from lib.moe.pages import moe_items
from lib.moe.pages.cifar10h import REFERENCE_ACCURACY, REFERENCE_NAME, Cifar10hPage
from lib.moe.tables import fmt, results_frame, summarize
from lib.moe.train import load_predictions

#: How close (in hard ECE) to the sweep's lowest point "near the optimum" means: our tolerance, the
#: paper gives none. The rule's margin (:data:`lib.moe.claims.MARGIN`) sits on top of it.
NEAR_TOL: float = 0.02
#: The smallest fall of the effective-support fraction, first to last lambda, the support claim is about.
SUPPORT_MARGIN: float = 0.05
#: Appendix D.6, Table 5: lambda -> perplexity of the tilted weights on CIFAR-10H training batches of
#: 128 (a trained Robust MoE checkpoint at each lambda), effective fraction, ratio bound 1/alpha, top-k
#: (a column ours lacks, so marked as the paper's).
PAPER_TABLE5 = pd.DataFrame(paper_text.PAPER["sensitivity"]["table5"]).rename(columns={"top_k": "top_k (paper)"})


def sensitivity_warmups(cfg: Mapping[str, Any]) -> list[int]:
    """The warmups of the warmup sweep that fit the scale's epochs."""
    return [int(w) for w in cfg["warmups"] if int(w) <= int(cfg["epochs"])]


#: The paper's default robustness parameter (claim 1 says it sits near the hard-ECE optimum).
PAPER_LAMBDA: float = paper_text.PAPER["sensitivity"]["lam"]
#: The paper's best warmup as a share of training (20 of 50 epochs, claim 2).
PAPER_WARMUP_FRACTION: float = paper_text.PAPER["sensitivity"]["warmup_fraction"]
#: Batch size over which the tilted weights are normalized for Table 5 (the paper's batch size).
SUPPORT_BATCH: int = 128
LOSS_CLIP: float = 1e-12  #: Smallest probability of the true class before its log is taken (keeps the loss finite).


def split_sweeps(
    frame: pd.DataFrame, cfg: Mapping[str, Any], warmups: Sequence[int]
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The results frame's reference (Vanilla MoE), lambda-sweep and warmup-sweep runs."""
    robust_runs = frame["method"] == "robust"
    ref = frame[frame["method"] == "vanilla"]
    lam_frame = frame[robust_runs & (frame["warmup_epochs"] == cfg["warmup"]) & frame["lam"].isin(cfg["lams"])]
    warm_frame = frame[robust_runs & (frame["lam"] == cfg["lam"]) & frame["warmup_epochs"].isin(warmups)]
    return ref, lam_frame, warm_frame


def sweep_published(
    hard: pd.DataFrame, overall: pd.DataFrame, key: str, as_int: bool = False
) -> dict[str, dict[str, float]]:
    """Hard ECE and overall accuracy per sweep point, keyed by the point as text."""
    if len(hard) != len(overall):
        raise ValueError(f"hard, overall: {len(hard)} and {len(overall)} rows differ")
    return {
        str(int(k) if as_int else k): {"hard_ece": float(e), "accuracy": float(a)}
        for k, e, a in zip(hard[key], hard["ece"], overall["accuracy"])
    }


def sweep_table(lam_hard: pd.DataFrame, lam_all: pd.DataFrame, ref_sum: pd.DataFrame) -> pd.DataFrame:
    """The lambda sweep's numbers with Vanilla MoE (ERM) as the reference row."""
    cols = {"ece": "hard ECE", "ece_se": "se", "ece_ts": "hard ECE+TS"}
    sweep = lam_hard[["lam", *cols]].rename(columns=cols).merge(lam_all[["lam", "accuracy", "accuracy_se"]], on="lam")
    hard, overall = (ref_sum[ref_sum.subset == s] for s in ("hard", "all"))
    erm = {"lam": ["ERM (Vanilla MoE)"], "hard ECE": hard["ece"].values, "hard ECE+TS": hard["ece_ts"].values}
    return pd.concat([sweep, pd.DataFrame(erm | {"accuracy": overall["accuracy"].values})], ignore_index=True)


def tilted_support(probs: np.ndarray, labels: np.ndarray, lam: float) -> dict[str, float] | None:
    """Effective support (:func:`lib.moe.robust.effective_support`) of ``softmax(lam * loss)`` over
    batches of :data:`SUPPORT_BATCH` examples' cross-entropy losses; None when fewer than one batch."""
    p = probs.astype(np.float64)
    p = p / p.sum(axis=1, keepdims=True)
    losses = -np.log(np.clip(p[np.arange(len(p)), labels.astype(int)], LOSS_CLIP, None))
    nb = len(losses) // SUPPORT_BATCH
    if nb == 0:
        return None
    w = torch.softmax(lam * torch.tensor(losses[: nb * SUPPORT_BATCH]).view(nb, SUPPORT_BATCH), dim=1)
    return robust.effective_support(w)


def support_frame(records: Iterable[Mapping[str, Any]], keys: Iterable[str], all_mask: Any = None) -> pd.DataFrame:
    """Table 5 from our trained models, one row per run in ``keys``: its lambda, seed and the effective
    support of its tilted weights at its own lambda (:func:`tilted_support` of its test predictions;
    with ``all_mask``, the data bundle's, only the natural-proportion sample of a subsampled test set,
    whose added hard images would otherwise weigh in)."""
    keys = set(keys)
    rows = []
    for rec in [r for r in records if r["key"] in keys]:
        pred = load_predictions(rec)
        lam = rec["config"]["train"]["lam"]
        keep = slice(None) if all_mask is None else np.asarray(all_mask, dtype=bool)
        sup = tilted_support(pred["probs"][keep], pred["labels"][keep], lam)
        if sup is not None:
            rows.append({"lam": lam, "seed": int(rec["config"]["train"]["seed"]), **sup})
    return pd.DataFrame(rows, columns=["lam", "seed", "perplexity", "fraction", "ratio_bound"])


def support_table(support: pd.DataFrame) -> pd.DataFrame:
    """:func:`support_frame` averaged over seeds, one row per lambda."""
    return support.drop(columns="seed").groupby("lam", as_index=False).mean()


def warmup_target(epochs: int) -> int:
    """The paper's best warmup (:data:`PAPER_WARMUP_FRACTION` of training) in whole epochs."""
    return round(PAPER_WARMUP_FRACTION * epochs)


def near_best(sweep: pd.DataFrame, key: str, value: float) -> tuple[str, str]:
    """Is ``key`` = ``value`` within :data:`NEAR_TOL` of the sweep's lowest hard ECE? ``sweep`` has one
    row per (point, seed) with ``key``, ``seed`` and ``ece``. The point is compared with the best
    *other* point (lowest mean ECE among the rest; compared with itself the gap would be 0 on every
    seed, a claim that cannot fail): per seed, the effect is NEAR_TOL minus the gap ECE(value) -
    ECE(best other), negative where the point itself is the lowest, judged by
    :func:`lib.report.paired_verdict` with margin ``MARGIN`` (with one seed: held if the gap is below
    NEAR_TOL - MARGIN, did not hold above NEAR_TOL + MARGIN). Inconclusive when the point was not run."""
    point = np.isclose(sweep[key].astype(float), value)
    if not point.any() or sweep[key].nunique() < 2:
        return report.VERDICTS[2], f"{key}={value:g} not in the sweep"
    means = sweep.groupby(key)["ece"].mean()
    others = means[~np.isclose(means.index.astype(float), value)]
    best = others.idxmin()
    at = sweep[point].set_index("seed")["ece"]
    gap = seed_diff(at, sweep[sweep[key] == best].set_index("seed")["ece"])
    return (
        report.paired_verdict(NEAR_TOL - gap, MARGIN),
        f"{key}={value:g}: hard ECE {fmt(float(at.mean()))}; best other at {key}={best:g}: "
        f"{fmt(float(others.min()))}; gap {diff_text(gap)} (tolerance {NEAR_TOL:g})",
    )


def shrinking_support(support: pd.DataFrame, margin: float = SUPPORT_MARGIN) -> tuple[str, str]:
    """The effective-support fraction at the smallest lambda minus that at the largest, per seed
    (:func:`support_frame`), judged by :func:`lib.report.paired_verdict` with ``margin``; with fewer
    than two lambdas, inconclusive. Also the mean fractions in lambda order, as text."""
    if support["lam"].nunique() < 2:
        return report.VERDICTS[2], "fewer than two lambdas"
    lo, hi = support["lam"].min(), support["lam"].max()
    diffs = seed_diff(*(support[support["lam"] == v].set_index("seed")["fraction"] for v in (lo, hi)))
    rows = support_table(support).itertuples()
    text = "fractions " + ", ".join(f"{r.fraction:.3f} (lambda {r.lam:g})" for r in rows)
    return report.paired_verdict(diffs, margin), f"{text}; first minus last {diff_text(diffs)}"


def sensitivity_claims(
    lam_hard: pd.DataFrame, warm_hard: pd.DataFrame, support: pd.DataFrame, epochs: int
) -> list[dict[str, str]]:
    """The page's three claim rows (before the accuracy floor) from the per-seed hard-subset rows of
    the two sweeps and the per-seed effective support (:func:`support_frame`)."""
    lam_verdict, lam_text = near_best(lam_hard, "lam", PAPER_LAMBDA)
    warm_verdict, warm_text = near_best(warm_hard, "warmup_epochs", warmup_target(epochs))
    warm_text = f"{warmup_target(epochs)} of {epochs} epochs; {warm_text}"
    sup_verdict, sup_text = shrinking_support(support)
    return [
        report.claim_row(
            f"lambda = 2 is within {NEAR_TOL:g} of the sweep's lowest hard ECE",
            "'The default [lambda = 2] used throughout the experiments sits near the Hard-ECE optimum' (App. E, "
            f"Fig. E.7); the paper puts no number on 'near': {NEAR_TOL:g} is the book's",
            lam_text,
            lam_verdict,
        ),
        report.claim_row(
            f"a {PAPER_WARMUP_FRACTION:.0%} warmup (the nearest whole epoch of the scale's) is within {NEAR_TOL:g} "
            "of the sweep's lowest hard ECE",
            "'The warmup sweep shows that [...] (out of 50 training epochs) gives the best joint "
            "calibration-accuracy tradeoff' (App. E, Fig. E.8; the number is lost in our text): the book "
            f"tests the default, 20 of 50 (Table 4), on the calibration half only, hard ECE within {NEAR_TOL:g} "
            "of the sweep's lowest",
            warm_text,
            warm_verdict,
        ),
        report.claim_row(
            "the effective support of trained models shrinks as lambda grows",
            "'the mapping is monotone and smooth in lambda' (App. D.6, Table 5: 95.6% at 0.5 ... 51.3% at 5, "
            "on training batches; no errors printed). For any fixed losses the tilt's support shrinks as "
            "lambda grows, so this is a check, not a test: the book measures each model's test losses",
            sup_text,
            sup_verdict,
            kind=report.KINDS[1],
        ),
    ]


def run_plan(cfg: Mapping[str, Any]) -> list[Any]:
    """The page's runs at the settings ``cfg``, each once (the sweeps share their default point), in plan
    order: Vanilla MoE (ERM), Robust MoE per ``cfg['lams']`` at warmup ``cfg['warmup']``, and Robust MoE
    per warmup of :func:`sensitivity_warmups` at ``cfg['lam']``."""
    missing = [k for k in ("lams", "warmup", "lam") if k not in cfg]
    if missing:
        raise ValueError(f"cfg: missing {', '.join(map(repr, missing))} (lib.config.settings('sensitivity', scale))")
    robust_cfgs = exp.train_configs(cfg, methods=["robust"])  # at cfg["lam"]
    lam_cfgs = [c.replace(warmup_epochs=cfg["warmup"], lam=float(lam)) for lam in cfg["lams"] for c in robust_cfgs]
    warm_cfgs = [c.replace(warmup_epochs=int(w)) for w in sensitivity_warmups(cfg) for c in robust_cfgs]
    sweeps = [*exp.train_configs(cfg, methods=["vanilla"]), *lam_cfgs, *warm_cfgs]
    return [it.config for it in moe_items("sensitivity", sweeps)]


def claims(
    lam_frame: pd.DataFrame, warm_frame: pd.DataFrame, support: pd.DataFrame, epochs: int, test_labels: Any
) -> tuple[pd.DataFrame, str]:
    """The page's claims (:func:`sensitivity_claims`) from the per-seed rows of the two sweeps and the
    per-seed support, gated (:func:`lib.moe.claims.gate`) on the best mean Robust MoE accuracy on all
    test points over both sweeps, against ``REFERENCE_ACCURACY`` (our choice: the paper's were lost)
    above chance, the majority rate of ``test_labels``. Returns the claims table and the floor rule
    (:func:`lib.report.floor_rule`) followed by the gate's sentence."""
    sweeps = {"lam": lam_frame, "warmup_epochs": warm_frame}
    overall = pd.concat([f[f["subset"] == "all"].groupby(k)["accuracy"].mean() for k, f in sweeps.items()])
    lam_hard, warm_hard = (f[f["subset"] == "hard"] for f in sweeps.values())
    rows = sensitivity_claims(lam_hard, warm_hard, support, epochs)
    return gate(rows, float(overall.max()), REFERENCE_ACCURACY, test_labels, reference=REFERENCE_NAME)[:2]


class SensitivityPage(Cifar10hPage):
    """The CIFAR-10H page's data and benchmark, its runs the sweeps."""

    name = "sensitivity"
    title = "Sensitivity to lambda and warmup: Figures E.7, E.8, Table 5"
    unit = "runs"
    rank = 1

    def runs(self, cfg: Mapping[str, Any], target: str | None = None) -> list[Item]:
        return moe_items(self.name, run_plan(cfg))

    def table(self, items: Sequence[Item], got: Mapping[str, dict[str, Any]]) -> Any:
        """The sweeps (Figs. E.7, E.8) from the published records ``got`` (plan id -> record) of the
        planned ``items``: one row per (method, lambda, warmup) with hard ECE and overall accuracy as
        mean ± SE and the seeds published of those planned; ``None`` when nothing is published."""
        recs = [got[it.id] for it in items if it.id in got]
        if not recs:
            return None
        by = ("method", "lam", "warmup_epochs")
        summ = summarize(results_frame(recs), by=by)
        hard, overall = (summ[summ["subset"] == subset].set_index(list(by)) for subset in ("hard", "all"))
        # the effective warmup, as records hold it (Vanilla MoE's config leaves warmup_epochs None)
        planned = pd.Series([(it.config.method, it.config.lam, it.config.warmup) for it in items])
        return pd.DataFrame(
            [
                {
                    "method": exp.METHOD_LABELS.get(idx[0], idx[0]),
                    "lambda": f"{idx[1]:g}" if idx[0] in WARMUP_METHODS else "—",  # ERM has no lambda or warmup
                    "warmup": f"{idx[2]:g}" if idx[0] in WARMUP_METHODS else "—",
                    "hard ECE": fmt(hard.loc[idx, "ece"], hard.loc[idx, "ece_se"]),
                    "accuracy": fmt(overall.loc[idx, "accuracy"], overall.loc[idx, "accuracy_se"])
                    if idx in overall.index
                    else "—",
                    "coverage": f"{int(hard.loc[idx, 'seeds'])} of {int((planned == idx).sum())} seeds",
                }
                for idx in hard.index
            ]
        )


PAGE = SensitivityPage()
