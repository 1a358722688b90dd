"""The CIFAR-10 page of paper 4 (``notebooks/losses_cifar10.py``): Tables 1-2 and 4, Figures 1-3,
5-6 and App. C. Its plan: every compared loss and confidence score, three seeds at paper scale (Sec.
5), and seed 0 of the AU loss's (coverage, nu) sweep, one :func:`lib.rr.experiment.run_loss` each;
its claims (:func:`reweighted_claims`, shared with the released-logits page) with the analytic
gradient threshold as a numerical check.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy.special import softmax

from lib.config import paper_numbers, settings
from lib import report
from lib.engine.plan import Item
from lib.engine.cache import training
from lib.nets import image_training
from lib.page import Page
from lib.rr import experiment
from lib.rr import weights as rwt
from lib.rr.experiment import CSF_LOSSES, LABELS, TABLE_LOSSES
from lib.rr.gamma import PAPER_SELECTED_GAMMAS
from lib.validation import check_choice

AU_SWEEP = "au (coverage / nu sweep)"
"""The method label of the AU sweep's runs (its default point is the table's AU run)."""


def _paper_row(label: str, gamma_model: str, coverage: float, **metrics: list[float]) -> dict[str, Any]:
    """One model's numbers of ``lib/rr/paper.toml``: label, App. Table 2's gammas, Table 3's coverage,
    then each metric's values keyed by loss (listed in the paper's column order, :data:`TABLE_LOSSES`)."""
    gammas = {f"gamma_{k}": v for k, v in PAPER_SELECTED_GAMMAS["CIFAR-10", gamma_model].items()}
    columns = {m: dict(zip(TABLE_LOSSES, values, strict=True)) for m, values in metrics.items()}
    return {"label": label, **gammas, "coverage": coverage, **columns}


PAPER_CIFAR10: dict[str, dict[str, Any]] = {
    model: _paper_row(**numbers) for model, numbers in paper_numbers("rr")["cifar10"].items()
}
"""The paper's CIFAR-10 numbers (x100, means of three seeds; ``lib/rr/paper.toml``) for the ResNet-50 (released logits) and
the WRN-28-10 (paper scale): Tables 1, 2 and 4, App. Table 2's gammas and Table 3's coverage."""

PUBLISHED_METRICS: tuple[str, ...] = (
    "accuracy",
    "ece",
    "ece_a",
    "cwece",
    "ece_ts",
    "cwece_ts",
    "conf_gap",
    "temperature",
)
"""The metrics published per loss as ``rr_<loss>_<metric>`` (the mean over the run's seeds)."""

TABLE_METRICS: dict[str, str] = {
    "accuracy": "accuracy",
    "ece": "ECE",
    "ece_a": "ECE^a",
    "cwece": "cwECE",
    "cwece_a": "cwECE^a",
    "ece_ts": "ECE+TS",
    "ece_a_ts": "ECE^a+TS",
    "cwece_ts": "cwECE+TS",
    "temperature": "T",
    "conf_gap": "confidence - accuracy",
}
"""The columns of :func:`loss_table`: each metric and its name in the paper (Sec. 5: "^a" adaptive
binning, "cw" class-wise, "+TS" after temperature scaling, T the temperature)."""

CLAIM_TOL: float = 0.005
"""ECE (and confidence-gap) differences within this (half an ECE point) are 'inconclusive at this scale'."""

FINE_TOL_FACTOR: float = 5.0
"""Class-wise ECE and the ECE drop from TS are smaller numbers: judged within ``tol / FINE_TOL_FACTOR``."""

AU_ACCURACY_COST: float = 0.025
"""How far below XE the AU loss's accuracy may lie for 'costs little accuracy' (2.5 points; Table 2:
92.52 vs 94.51 on ResNet-50): the book's own bar and expectation (``kind`` "expectation"), in no
sentence of the paper, which states only an aim ('without significantly compromising predictive
accuracy', Sec. 2)."""

GRADIENT_CHECK: str = "the inverse focal gradient turns positive for gamma above about 3.5"
"""The analytic check (Sec. 5: "when gamma > 3.5"; App. C.2: "greater than 4"): true by calculus, so
shown apart from the claims."""

GRADIENT_THRESHOLD_RANGE: tuple[float, float] = (3.4, 4.0)
"""'About 3.5' holds when the analytic threshold gamma lies in this closed interval."""

CDF_NUS: tuple[float, ...] = (0.005, 0.05, 0.1, 0.3)
"""The smoothing widths nu drawn in the smoothed-CDF figure (cf. App. Fig. 5)."""


def _x100(key: str, value: float) -> float:
    """A metric in the paper's unit: x100, the temperature as it is."""
    return float(value) * (1 if key == "temperature" else 100)


def loss_table(metrics: Mapping[str, Mapping[str, float]]) -> pd.DataFrame:
    """One row per loss, columns :data:`TABLE_METRICS` by the paper's names, x100 but the temperature."""
    rows = [
        {"loss": LABELS.get(n, n)} | {c: _x100(k, m[k]) for k, c in TABLE_METRICS.items()} for n, m in metrics.items()
    ]
    return pd.DataFrame(rows).set_index("loss")


def paper_comparison(metrics: Mapping[str, Mapping[str, float]], row: str) -> pd.DataFrame:
    """Ours beside the paper's ``row`` of :data:`PAPER_CIFAR10` (Tables 1, 2 and 4; x100)."""
    check_choice(row, tuple(PAPER_CIFAR10), "row")
    paper = PAPER_CIFAR10[row]
    rows = []
    for name, m in metrics.items():
        rows.append({"loss": LABELS.get(name, name)})
        for k in ("accuracy", "ece", "ece_a", "cwece", "cwece_ts", "ece_a_ts", "temperature"):
            c = TABLE_METRICS[k]
            rows[-1].update({f"{c} (ours)": _x100(k, m[k]), f"{c} (paper)": paper[k].get(name, float("nan"))})
    return pd.DataFrame(rows).set_index("loss")


def mean_metrics(seeds: Mapping[str, Sequence[Mapping[str, float]]]) -> dict[str, dict[str, float]]:
    """Per loss, the mean over its seeds of every metric."""
    return {k: {m: float(np.mean([s[m] for s in runs])) for m in runs[0]} for k, runs in seeds.items()}


def reweighted_claims(
    seeds: Mapping[str, Sequence[Mapping[str, float]]], tol: float = CLAIM_TOL, row: str = "resnet50"
) -> list[dict[str, Any]]:
    """The paper's claims (Sec. 5, Tables 1-2 and 4, Figure 2) judged from ``seeds[loss]`` (each
    seed's metrics, same seed order for every loss) by :func:`lib.report.paired_verdict` with margin
    ``tol``; claims whose losses are missing are skipped. ``paper_own`` applies the rule to ``row`` of
    :data:`PAPER_CIFAR10` (no errors reported: the margin decides); for the over- and underconfidence
    of Fig. 2 it reads the temperature the paper's Tables 1 and 4 fit for that row (T > 1 softens an
    overconfident model, T < 1 sharpens an underconfident one, T = 1 says neither)."""
    check_choice(row, tuple(PAPER_CIFAR10), "row")
    ref = PAPER_CIFAR10[row]
    arch, fine = ref["label"], tol / FINE_TOL_FACTOR
    rows: list[dict[str, Any]] = []

    def diffs(a: str, b: str, metric: str) -> np.ndarray:
        return np.array([x[metric] - y[metric] for x, y in zip(seeds[a], seeds[b], strict=True)])

    def ours(a: str, b: str, metric: str, digits: int = 2) -> str:
        mean = mean_metrics({k: seeds[k] for k in (a, b)})
        n = len(seeds[a])
        return f"{100 * mean[a][metric]:.{digits}f} vs {100 * mean[b][metric]:.{digits}f} ({n} seed{'s' * (n != 1)})"

    if "au" in seeds and "xe" in seeds:
        for metric, name, digits, margin, table in (("ece", "ECE", 2, tol, 2), ("cwece", "cwECE", 3, fine, 1)):
            rows.append(
                report.claim_row(
                    f"AU loss has lower {name} than XE",
                    f"{ref[metric]['au']:.{digits}f} vs {ref[metric]['xe']:.{digits}f} ({arch}, Table {table}, x100)",
                    ours("au", "xe", metric, digits),
                    report.paired_verdict(diffs("xe", "au", metric), margin),
                    report.t_verdict((ref[metric]["xe"] - ref[metric]["au"]) / 100, None, margin),
                )
            )
        cost = AU_ACCURACY_COST - (ref["accuracy"]["xe"] - ref["accuracy"]["au"]) / 100
        rows.append(
            report.claim_row(
                f"AU loss costs little accuracy (less than {100 * AU_ACCURACY_COST:g} points below XE, beyond the "
                "claims' margin and the seeds' noise)",
                f"the book's bar, not the paper's (it aims 'without significantly compromising predictive "
                f"accuracy', Sec. 2); its Table 2: {ref['accuracy']['au']:.2f} vs {ref['accuracy']['xe']:.2f} ({arch})",
                ours("au", "xe", "accuracy"),
                report.paired_verdict(AU_ACCURACY_COST - diffs("xe", "au", "accuracy"), tol),
                report.t_verdict(cost, None, tol),
                kind=report.KINDS[2],
            )
        )
    for k, label, sign, paper in (
        ("fl53", "focal loss leaves the model overconfident (mean confidence > accuracy)", 1, "overconfident"),
        ("inverse_focal", "inverse focal loss leaves the model underconfident", -1, "underconfident"),
        ("aurc", "AURC loss leaves the model underconfident", -1, "underconfident"),
    ):
        if k in seeds:
            gaps = np.array([s["conf_gap"] for s in seeds[k]])
            t = ref["temperature"][k]  # T > 1 softens (the model was overconfident), T < 1 sharpens
            rows.append(
                report.claim_row(
                    label,
                    f"{paper} (Fig. 2, PreResNet-56 diagrams); its own Tables 1 and 4 fit T = {t:g} for {arch} "
                    f"({'overconfident' if t > 1 else 'underconfident' if t < 1 else 'neither'} by that)",
                    f"confidence - accuracy = {100 * gaps.mean():+.2f} ({len(gaps)} seed{'s' * (len(gaps) != 1)})",
                    report.paired_verdict(sign * gaps, tol),
                    report.VERDICTS[2] if t == 1 else report.verdict(sign * (t - 1) > 0),
                )
            )
    if "xe" in seeds:  # Table 4's ECE^a (equal-mass bins) on both sides
        drops = np.array([s["ece_a"] - s["ece_a_ts"] for s in seeds["xe"]])
        rows.append(
            report.claim_row(
                "temperature scaling lowers XE's ECE^a",
                f"ECE^a {ref['ece_a']['xe']:.2f} -> {ref['ece_a_ts']['xe']:.2f} ({arch}, Table 4)",
                f"ECE^a {100 * np.mean([s['ece_a'] for s in seeds['xe']]):.2f} -> "
                f"{100 * np.mean([s['ece_a_ts'] for s in seeds['xe']]):.2f}",
                report.paired_verdict(drops, fine),
                report.t_verdict((ref["ece_a"]["xe"] - ref["ece_a_ts"]["xe"]) / 100, None, fine),
            )
        )
    return rows


def gradient_check(threshold: float) -> dict[str, Any]:
    """The numerical check: the inverse focal gradient's gamma ``threshold`` (App. C.2) lies in
    :data:`GRADIENT_THRESHOLD_RANGE`."""
    lo, hi = GRADIENT_THRESHOLD_RANGE
    ours, verdict = f"threshold {threshold:.2f} (analytic)", report.verdict(lo <= threshold <= hi)
    return report.claim_row(
        GRADIENT_CHECK, "gamma > 3.5 (Sec. 5; App. C.2 says > 4)", ours, verdict, kind=report.KINDS[1]
    )


def by_loss(runs: Mapping[str, Mapping[str, Any]], cfg: Mapping[str, Any]) -> dict[str, list[Mapping[str, Any]]]:
    """The compared losses' records, seed by seed: the runs at the scale's coverage and nu (every
    loss's; the AU sweep's other points left out)."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for r in sorted(runs.values(), key=lambda r: r["config"]["seed"]):
        if (r["config"]["coverage"], r["config"]["nu"]) == (float(cfg["coverage"]), float(cfg["nu"])):
            out.setdefault(r["config"]["loss"], []).append(r)
    return out


def scale_line(cfg: Mapping[str, Any]) -> str:
    """What the plan runs, on what, in one line."""
    n = int(cfg["seeds"])
    seeds = f"{n} seed{'s' * (n != 1)} per loss" + (", seed 0 of the AU sweep" if n > 1 else "")
    heads = f"per loss a 2-layer head on the features of {{}} training images for {cfg['head_epochs']} epochs"
    network = f"SGD lr 0.1, {cfg['epochs']} epochs, lr x0.2 at {cfg['milestones']}"
    kappa = f"AU coverage {cfg['coverage']:g}, nu {cfg['nu']:g}"
    return image_training.scale_line(cfg, heads, network, f"{kappa}; {seeds}")


def published(
    metrics: Mapping[str, Mapping[str, float]], prefix: str = "rr", keys: Sequence[str] = PUBLISHED_METRICS
) -> dict[str, float]:
    """``<prefix>_<loss>_<metric>`` for every loss and metric of ``keys``."""
    return {f"{prefix}_{name}_{key}": float(m[key]) for name, m in metrics.items() for key in keys}


def csf_table(metrics: Mapping[str, Mapping[str, float]]) -> pd.DataFrame:
    """The AU loss with each confidence score function: test ECE x100 and accuracy (cf. Fig. 3)."""
    return pd.DataFrame(
        [
            {"CSF": LABELS[n], "ECE x100": 100 * metrics[n]["ece"], "accuracy": metrics[n]["accuracy"]}
            for n in CSF_LOSSES
        ]
    )


def gradient_charts() -> Any:
    """d loss / d p_t of focal losses and of inverse focal losses for gamma 1..5, side by side
    (paper 4, App. C.1-C.2, Fig. 1)."""
    from lib import plots

    p, grad = np.linspace(0.02, 1.0, 197), rwt.loss_gradient
    focal = {"XE": grad("xe", p), "focal gamma 1": grad("focal", p, 1.0)}
    focal.update({"focal gamma 3": grad("focal", p, 3.0), "FL-53": grad("fl53", p)})
    inverse = {f"inverse focal gamma {g}": grad("inverse_focal", p, g) for g in (1.0, 2.0, 3.0, 4.0, 5.0)}
    kw = {"y_title": "d loss / d p_t", "width": 250}
    left = plots.curves_chart(p, focal, title="focal loss (App. C, Fig. 1a)", y_domain=(-10, 1), **kw)
    right = plots.curves_chart(p, inverse, title="inverse focal loss (App. C.2; cf. Fig. 1b)", y_domain=(-10, 3), **kw)
    return plots.legend_below(left | right, columns=3)


def paper_row_line(cfg: Mapping[str, Any]) -> str:
    """The paper's row this scale compares with, its gammas and coverage, in one line."""
    row = PAPER_CIFAR10[cfg["paper_row"]]
    return (
        f"paper row: {row['label']}; gammas dual {cfg['gamma_dual_focal']}, inverse "
        f"{cfg['gamma_inverse_focal']}; coverage {cfg['coverage']} (paper {row['coverage']})"
    )


def smoothed_cdf_curves() -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The smoothed CDF (eq. 21, 15 bins) for each nu of :data:`CDF_NUS` beside the empirical CDF of
    512 MSP-like scores (1 - Beta(0.6, 4), seed 0), on 201 points of [0, 1] (cf. App. Fig. 5)."""
    rng = np.random.default_rng(0)
    scores = np.clip(1 - rng.beta(0.6, 4.0, size=512), 0, 1)
    edges = torch.linspace(0, 1, 15 + 1, dtype=torch.float64)
    grid = torch.linspace(0, 1, 201, dtype=torch.float64)
    curves = {"empirical CDF": np.searchsorted(np.sort(scores), grid.numpy(), side="right") / len(scores)}
    for v in CDF_NUS:
        curves[f"nu = {v}"] = rwt.smoothed_cdf(torch.as_tensor(scores), edges, v, at=grid).numpy()
    return grid.numpy(), curves


def reliability_diagrams(records: Mapping[str, Mapping[str, Any]]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per loss of the tables: the test confidences and correctness of its (seed-0) run,
    labelled with its ECE x100."""
    diagrams = {}
    for name in TABLE_LOSSES:
        lg = experiment.run_logits(records[name])
        pt = softmax(lg["test"].astype(np.float64), axis=1)
        label = f"{LABELS[name]} (ECE {100 * records[name]['metrics']['ece']:.2f})"
        diagrams[label] = (pt.max(1), pt.argmax(1) == lg["test_y"])
    return diagrams


def sweep_table(runs: Mapping[str, Mapping[str, Any]], cfg: Mapping[str, Any]) -> pd.DataFrame:
    """Validation ECE x100, accuracy and training accuracy of the AU loss (MSP, seed 0) over the
    coverage x nu grid (cf. App. Fig. 6); a diverged run has NaN metrics and its ``diverged epoch``."""
    from lib.calibration.metrics import ece

    au = {(c["coverage"], c["nu"]): r for r in runs.values() if (c := r["config"])["loss"] == "au" and c["seed"] == 0}
    rows = []
    for kappa in cfg["coverages"]:
        for v in cfg["nus"]:
            rec = au[(float(kappa), float(v))]
            row = {"coverage": kappa, "nu": v, "val ECE x100": np.nan, "val accuracy": np.nan}
            diverged = rec.get("diverged_epoch")  # a diverged run has no train_accuracy
            row["train accuracy"] = rec.get("train_accuracy", np.nan)
            row["diverged epoch"] = np.nan if diverged is None else float(diverged)
            if diverged is None:
                lg = experiment.run_logits(rec)
                pv = softmax(lg["val"].astype(np.float64), axis=1)
                row["val ECE x100"] = 100 * ece(pv, lg["val_y"])
                row["val accuracy"] = float((pv.argmax(1) == lg["val_y"]).mean())
            rows.append(row)
    return pd.DataFrame(rows)


def au_fit_note(records: Mapping[str, Mapping[str, Any]], sweep: pd.DataFrame) -> str:
    """The training accuracy of the AU heads beside cross-entropy's and the sweep's diverged
    points, in Markdown (eq. 36 says why it can be low); empty without training accuracies."""
    au, xe = records.get("au", {}), records.get("xe", {})
    if au.get("train_accuracy") is None or xe.get("train_accuracy") is None:
        return ""
    fitted = sweep.dropna(subset=["train accuracy"])
    points = ", ".join(
        f"{r['train accuracy']:.3f} at κ = {r['coverage']:g}, ν = {r['nu']:g}" for r in fitted.to_dict("records")
    )
    gone = sweep[sweep["diverged epoch"].notna()]
    out = (
        f"**What the AU heads fitted.** The AU (MSP) head classifies {au['train_accuracy']:.3f} of its own "
        f"training images correctly (κ = {au['config']['coverage']:g}, ν = {au['config']['nu']:g}); the "
        f"cross-entropy head {xe['train_accuracy']:.3f}. The loss's gradient flows through G(s_i) for the samples below the "
        "batch's coverage threshold (eq. 36), and their weight grows with their confidence, so every "
        "step also pushes their confidence down, against their cross-entropy: a head over fixed "
        "features can leave them unlearnt. "
    )
    if points:
        out += f"Training accuracy over the sweep: {points}."
    if len(gone):
        where = ", ".join(
            f"κ = {r['coverage']:g}, ν = {r['nu']:g} (epoch {r['diverged epoch']:.0f})" for r in gone.to_dict("records")
        )
        out += f" Diverged (non-finite outputs; left blank above): {where}."
    return out


def tradeoff_chart(metrics: Mapping[str, Mapping[str, float]], row: str) -> Any:
    """Accuracy against ECE (x100) per loss of the tables: ours (mean over seeds) beside the
    paper's ``row`` of Table 2, the trade-off the AU claims are about."""
    import altair as alt

    paper = PAPER_CIFAR10[row]
    points = pd.DataFrame(
        [
            {"loss": LABELS[k], "ECE x100": e, "accuracy": a, "source": who}
            for k in TABLE_LOSSES
            if k in metrics
            for who, e, a in (
                ("ours", 100 * metrics[k]["ece"], 100 * metrics[k]["accuracy"]),
                (f"paper ({paper['label']}, Table 2)", paper["ece"][k], paper["accuracy"][k]),
            )
        ]
    )
    base = alt.Chart(points).encode(
        x=alt.X("ECE x100:Q", scale=alt.Scale(zero=False)),
        y=alt.Y("accuracy:Q", scale=alt.Scale(zero=False), title="accuracy x100"),
    )
    chart = base.mark_point(filled=True, size=60) + base.mark_text(dx=6, align="left", fontSize=10).encode(
        text="loss:N"
    )
    return (
        chart.properties(width=250, height=200)
        .facet(column=alt.Column("source:N", title=None))
        .resolve_scale(x="independent", y="independent")
    )


def claims(
    seeds: Mapping[str, Sequence[Mapping[str, float]]], threshold: float, tol: float, row: str, test_labels: Any
) -> tuple[pd.DataFrame, str]:
    """The page's claims table (:func:`lib.report.claims_table`): :func:`reweighted_claims` and
    :func:`gradient_check`, gated by the accuracy floor on XE's accuracy against the paper's ``row``
    (:func:`lib.report.gate_claims`); and, in Markdown, the floor's rule and how XE's accuracy stands
    against it."""
    rows = [*reweighted_claims(seeds, tol=tol, row=row), gradient_check(threshold)]
    return report.gate_claims(
        rows,
        accuracy=float(np.mean([s["accuracy"] for s in seeds["xe"]])),
        paper_accuracy=PAPER_CIFAR10[row]["accuracy"]["xe"] / 100,
        chance=report.chance_accuracy(test_labels),
        exempt=[GRADIENT_CHECK],
    )[:2]


class LossesCifar10Page(Page):
    name = "losses_cifar10"
    paper = "rr"
    title = "Trained on CIFAR-10: Tables 1-2 and 4, Figures 1-3, App. Figures 1, 5 and 6"
    rank = 5

    def runs(self, cfg: Mapping[str, Any], target: str | None = None) -> list[Item]:
        """Every compared loss seed by seed, then seed 0 of the AU sweep's other points; id
        ``losses_cifar10/<loss>/k<coverage>/nu<nu>/s<seed>``."""
        runs = [
            (experiment.loss_config(name, cfg, seed), name)
            for seed in range(int(cfg["seeds"]))
            for name in dict.fromkeys([*TABLE_LOSSES, *CSF_LOSSES])
        ]
        runs += [
            (experiment.loss_config("au", cfg, 0, coverage=float(k), nu=float(v)), AU_SWEEP)
            for k in cfg["coverages"]
            for v in cfg["nus"]
            if (float(k), float(v)) != (float(cfg["coverage"]), float(cfg["nu"]))
        ]
        tail = "{loss}/k{coverage}/nu{nu}/s{seed}"
        return [self.item(tail.format(**c), c["seed"], cfg["epochs"], label, config=c) for c, label in runs]

    data = image_training.page_data

    def run_one(self, item: Item, cfg: Mapping[str, Any], data: Any) -> dict[str, Any]:
        c = item.config
        return experiment.run_loss(c["loss"], cfg, data, seed=item.seed, coverage=c["coverage"], nu=c["nu"])

    def run(
        self, cfg: Mapping[str, Any], data: Any, train: bool = True, log: Callable[[str], None] = print
    ) -> dict[str, dict[str, Any]]:
        """Every planned run by plan id (trained as the queue trains them unless cached or published;
        none unless ``train``), one line per run to ``log``."""
        out: dict[str, dict[str, Any]] = {}
        t0 = [time.time()]

        def done(it: Item, rec: dict[str, Any]) -> None:
            out[it.id] = experiment.loss_record(rec)
            c, m = rec["config"], rec["metrics"]
            label = LABELS[c["loss"]] if it.method != AU_SWEEP else f"AU k {c['coverage']:g} nu {c['nu']:g}"
            log(f"{label:18s} s{c['seed']} acc {m['accuracy']:.3f}  ECE {m['ece']:.4f}  ({time.time() - t0[0]:.0f} s)")
            t0[0] = time.time()

        with training(train):
            self.train(self.runs(cfg), cfg, data, on_done=done)
        return out

    def table(self, items: Sequence[Item], got: Mapping[str, dict[str, Any]]) -> pd.DataFrame | None:
        """:func:`paper_comparison` of the published records ``got`` of ``items`` (means over seeds)
        against the row of the architecture trained at paper scale (``scales.toml``'s ``paper_row``),
        with the seeds and runs published; ``None`` when none is."""
        planned = [it for it in items if it.method in TABLE_LOSSES]
        got = {k: experiment.loss_record(rec) for k, rec in got.items()}
        seeds = {m: [got[it.id]["metrics"] for it in planned if it.method == m and it.id in got] for m in TABLE_LOSSES}
        seeds = {m: s for m, s in seeds.items() if s}
        if not seeds:
            return None
        table = paper_comparison(mean_metrics(seeds), settings(self.name, "paper")["paper_row"])
        table["seeds"] = [f"{len(seeds[m])} of {sum(it.method == m for it in planned)}" for m in seeds]
        table["runs"] = f"{len(got)} of {len(items)} runs of the page"
        return table


PAGE = LossesCifar10Page()
