"""The mixture-of-Gaussians page (``notebooks/l2d_gaussians.py``): paper 2's Figure 1, top row, and
Figure 3: one :func:`lib.l2d.experiment.run_gaussian` per point of two sweeps (seconds on a CPU), the
claims gated against the Bayes classifier's accuracy (:func:`bayes_accuracy`). The notebook calls the
plain functions below on the runs' table."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import multivariate_normal

from lib.config import paper_numbers
from lib.engine.plan import Item
from lib.l2d.experiment import SURROGATES, run_gaussian
from lib.l2d.gaussian_mixture import GAUSSIAN_COVS, GAUSSIAN_MEANS, gaussian_mixture
from lib.l2d.pages import L2DPage
from lib.l2d.results import pick

BAYES_SAMPLES: int = 40000
"""Monte Carlo draw of the mixture on which the Bayes classifier's accuracy is measured."""

BAYES_SEED: int = 123
"""Seed of that draw (apart from every training seed)."""

PAPER = paper_numbers("l2d")["l2d_gaussians"]
"""What Figure 1's top row shows, quoted per row of :func:`paper_table` (``paper``), and Figure 1a's
values as the authors' repository holds them (``repository_fig1a``; ``lib/l2d/paper.toml``)."""

REPOSITORY_FIG1A: dict[int, tuple[float, float]] = {int(j): tuple(v) for j, v in PAPER["repository_fig1a"].items()}
"""Figure 1a's values, (softmax, OvA) mean expert ECE per number of experts, as the authors' repository
holds them (rajevv/Multi_L2D, ``mog_results.ipynb``; the paper prints the plot only)."""


def scale_line(cfg: Mapping[str, Any]) -> str:
    """The page's scale line: what the plan at the settings ``cfg`` runs, on what."""
    stops = int(cfg["patience"]) < int(cfg["epochs"])  # else early stopping cannot end a run
    sgd = (
        f"SGD up to {cfg['epochs']} epochs with early stopping (patience {cfg['patience']})"
        if stops
        else f"SGD for {cfg['epochs']} epochs (early stopping's patience, {cfg['patience']}, is never reached)"
    )
    return (
        f"4-layer MLP (3x100) on our 4-cluster 2-D mixture, {cfg['n_train']}/{cfg['n_val']}/{cfg['n_test']} "
        f"train/val/test points per seed, {sgd}, {cfg['seeds']} seed{'s' * (cfg['seeds'] != 1)}, "
        f"experts 1..{max(cfg['num_experts'])}"
    )


def bayes_accuracy(n: int = BAYES_SAMPLES, seed: int = BAYES_SEED) -> tuple[pd.DataFrame, float, np.ndarray]:
    """How separable the mixture's clusters are: the Bayes classifier's accuracy between each pair
    of clusters and overall, from the known densities on a draw of ``n`` points; also the draw's labels."""
    xb, yb, _ = gaussian_mixture(n, seed=seed)
    dens = np.stack([multivariate_normal(GAUSSIAN_MEANS[c], GAUSSIAN_COVS[c]).pdf(xb) for c in range(4)], 1)
    pairs = []
    for a, b in itertools.combinations(range(4), 2):
        m = (yb == a) | (yb == b)
        pred = np.where(dens[m, a] >= dens[m, b], a, b)
        pairs.append({"clusters": f"{a + 1} vs {b + 1}", "Bayes accuracy": float((pred == yb[m]).mean())})
    return pd.DataFrame(pairs), float((dens.argmax(1) == yb).mean()), yb


def sweep_ends(summary: pd.DataFrame, cfg: Mapping[str, Any]) -> dict[str, float]:
    """The page's published means (:func:`lib.l2d.results.summarize`'s ``summary``): expert ECE at the
    fewest and most experts, system accuracy at the most, and the random expert's ECE at the lowest and
    highest quality, per surrogate."""
    lo_j, hi_j = min(cfg["num_experts"]), max(cfg["num_experts"])
    lo_p, hi_p = min(cfg["dependence_p"]), max(cfg["dependence_p"])
    ends = {}
    for s in SURROGATES:
        ends[f"gauss_ece_{s}_j{lo_j}"] = pick(summary, "experts", lo_j, s, "ece")
        ends[f"gauss_ece_{s}_j{hi_j}"] = pick(summary, "experts", hi_j, s, "ece")
        ends[f"gauss_acc_{s}_j{hi_j}"] = pick(summary, "experts", hi_j, s, "system_accuracy")
        ends[f"gauss_random_ece_{s}_lo"] = pick(summary, "dependence", lo_p, s, "ece_random_expert")
        ends[f"gauss_random_ece_{s}_hi"] = pick(summary, "dependence", hi_p, s, "ece_random_expert")
    return ends


def paper_table(ends: Mapping[str, float], cfg: Mapping[str, Any]) -> pd.DataFrame:
    """Figure 1's top row as the paper's plots show it (quoted; Fig. 1a's values from the authors'
    repository, :data:`REPOSITORY_FIG1A`, where both ends of our sweep are in it) beside our means
    (:func:`sweep_ends`)."""
    lo_j, hi_j = min(cfg["num_experts"]), max(cfg["num_experts"])
    lo_p, hi_p = min(cfg["dependence_p"]), max(cfg["dependence_p"])

    def pair(lo: str, hi: str) -> str:
        return f"{ends[lo]:.3f} -> {ends[hi]:.3f}"

    def repository(i: int) -> str:
        lo, hi = (REPOSITORY_FIG1A.get(j) for j in (lo_j, hi_j))
        return f"; the authors' repository: {lo[i]:.3f} -> {hi[i]:.3f}" if lo and hi else ""

    said = PAPER["paper"]
    rows = [
        (f"softmax expert ECE, {lo_j} -> {hi_j} experts", said["softmax_ece"] + repository(0),
         pair(f"gauss_ece_softmax_j{lo_j}", f"gauss_ece_softmax_j{hi_j}")),
        (f"OvA expert ECE, {lo_j} -> {hi_j} experts", said["ova_ece"] + repository(1),
         pair(f"gauss_ece_ova_j{lo_j}", f"gauss_ece_ova_j{hi_j}")),
        (f"random expert's softmax ECE, p = {lo_p} -> {hi_p}", said["random_softmax_ece"],
         pair("gauss_random_ece_softmax_lo", "gauss_random_ece_softmax_hi")),
        (f"random expert's OvA ECE, p = {lo_p} -> {hi_p}", said["random_ova_ece"],
         pair("gauss_random_ece_ova_lo", "gauss_random_ece_ova_hi")),
        (f"system accuracy with {hi_j} experts (softmax / OvA)", said["accuracy"],
         f"{ends[f'gauss_acc_softmax_j{hi_j}']:.3f} / {ends[f'gauss_acc_ova_j{hi_j}']:.3f}"),
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=["quantity", "paper", "ours"])


class L2DGaussiansPage(L2DPage):
    name = "l2d_gaussians"
    paper = "l2d"
    title = "Mixture of Gaussians: Figure 1, top row"
    experiments = ("experts", "dependence")
    paper_on_cpu = True  # 260 runs of a small MLP: minutes on a CPU

    def run_one(self, item: Item, cfg: Mapping[str, Any], data: Any = None) -> dict[str, Any]:
        """One cached run; its data are drawn from the mixture inside the run (its seed's draw)."""
        p = item.extra["point"]
        return run_gaussian(p["experiment"], p["value"], p["surrogate"], int(p["seed"]), cfg)


PAGE = L2DGaussiansPage()
