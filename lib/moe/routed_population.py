"""Finite populations routed to calibrated experts (paper 1, sections 3-4): the population, the
soft and hard mixtures, experts calibrated on their routing-weighted views, and what that
calibration implies on the training distribution.

Paper: "Calibrated mixture-of-experts under distribution shift" (paper 1),
sections 3-4. Binary prediction, as in the paper's analysis: a population is a finite set of input
*cells* i with probability ``pi_i``, outcome frequency ``eta_i = P(Y=1 | cell i)``, router weights
``r_i`` (K,) and expert predictions ``f_i`` (K,) of P(Y=1). The routing configuration of a cell is
Z_i = (r_i, f_i) (eq. 3).

* soft mixture p_i = sum_k r_ik f_ik; hard mixture p_i = f_{i, argmax_k r_ik} (section 3.1);
* expert k is calibrated on its routing-weighted view when E[r_k (Y - f_k) | f_k = v] = 0 for every
  level v (section 4.1; under hard routing r is one-hot, so this is calibration on region k).

A consequence used to build the example (derived here, not stated in the paper): if every expert
is calibrated on its routing-weighted view, summing E[r_k (Y - f_k) f_k] = 0 over k gives::

      E[(Y - p) p] = E[D],   D = sum_k r_k (f_k - p)^2   (routing-weighted disagreement),

so if the soft aggregate is also calibrated (E[(Y - p) p] = 0), co-routed experts must agree almost
surely. The two configurations of :func:`two_configuration_example` therefore differ in their
routing weights, not in what the experts say; see :func:`disagreement_identity`. What a shift of
the input distribution does to these populations is in :mod:`lib.moe.theory`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from lib.validation import (
    check_choice,
    check_finite,
    check_int,
    check_ndim,
    check_positive,
    check_same_length,
    to_numpy,
)

ROUTINGS: tuple[str, ...] = ("soft", "hard")
LEVEL_DECIMALS = 10  # prediction levels are matched after rounding to this many decimals


# --- Populations ----------------------------------------------------------------------------------


def hard_routing(r: np.ndarray) -> np.ndarray:
    """One-hot argmax of router weights (N, K) (ties go to the lowest expert index), section 3.1."""
    out = np.zeros_like(r)
    out[np.arange(r.shape[0]), r.argmax(axis=1)] = 1.0
    return out


@dataclass(frozen=True)
class RoutedPopulation:
    """A finite population of input cells with a router and K experts (binary outcome).

    ``pi`` (N,) cell probabilities (sum 1), ``eta`` (N,) P(Y=1 | cell), ``routing`` (N, K) soft router
    weights (rows on the simplex), ``experts`` (N, K) expert predictions of P(Y=1), ``kind`` (N,) a
    label per cell for display (e.g. "overlap", "dominant")."""

    pi: np.ndarray
    eta: np.ndarray
    routing: np.ndarray
    experts: np.ndarray
    kind: np.ndarray = field(default_factory=lambda: np.array([], dtype=object))

    def __post_init__(self) -> None:
        pi, eta = to_numpy(self.pi, "pi"), to_numpy(self.eta, "eta")
        r, f = to_numpy(self.routing, "routing"), to_numpy(self.experts, "experts")
        for name, arr, ndim in (("pi", pi, 1), ("eta", eta, 1), ("routing", r, 2), ("experts", f, 2)):
            check_ndim(arr, ndim, name, "one value per cell" if ndim == 1 else "N cells x K experts")
            check_finite(arr, name)
            check_same_length(pi, arr, "pi", name)
        if r.shape != f.shape:
            raise ValueError(f"experts: expected shape {r.shape} like routing, got {f.shape}")
        if (pi < 0).any() or abs(pi.sum() - 1) > 1e-9:
            raise ValueError("pi: must be non-negative and sum to 1")
        for name, arr in (("eta", eta), ("experts", f)):
            if (arr < 0).any() or (arr > 1).any():
                raise ValueError(f"{name}: probabilities must lie in [0, 1]")
        if (r < 0).any() or np.abs(r.sum(axis=1) - 1).max() > 1e-9:
            raise ValueError("routing: rows must be non-negative and sum to 1")
        kind = np.asarray(self.kind, dtype=object) if len(self.kind) else np.array(["cell"] * len(pi), dtype=object)
        check_same_length(pi, kind, "pi", "kind")
        for name, arr in (("pi", pi), ("eta", eta), ("routing", r), ("experts", f), ("kind", kind)):
            object.__setattr__(self, name, arr)

    @property
    def num_experts(self) -> int:
        """K, the number of experts."""
        return int(self.routing.shape[1])

    def weights(self, routing: str = "soft") -> np.ndarray:
        """Routing weights used by the mixture: soft weights or their one-hot argmax."""
        check_choice(routing, ROUTINGS, "routing")
        return self.routing if routing == "soft" else hard_routing(self.routing)

    def prediction(self, routing: str = "soft") -> np.ndarray:
        """Aggregate prediction p (N,): sum_k r_k f_k (soft) or the selected expert's f (hard)."""
        return (self.weights(routing) * self.experts).sum(axis=1)

    def regions(self) -> np.ndarray:
        """Routing region of every cell: argmax_k r_k (section 3.1)."""
        return self.routing.argmax(axis=1)

    def tidy(self) -> pd.DataFrame:
        """One row per cell: kind, pi, eta, routing weights r1..rK, expert predictions f1..fK, p."""
        cols: dict[str, object] = {"kind": self.kind, "pi": self.pi, "eta": self.eta}
        cols |= {f"r{k + 1}": self.routing[:, k] for k in range(self.num_experts)}
        cols |= {f"f{k + 1}": self.experts[:, k] for k in range(self.num_experts)}
        return pd.DataFrame({**cols, "p_soft": self.prediction("soft"), "p_hard": self.prediction("hard")})


def two_configuration_example(
    levels: Sequence[float] = (0.2, 0.4, 0.6, 0.8), overlap: float = 0.6, overlap_mass: float = 0.5, delta: float = 0.1
) -> RoutedPopulation:
    """The section 4.2 example: at each prediction level q, configurations with the same aggregate
    prediction q but different outcome frequencies, in balancing proportions.

    Two experts; at every level q both report f = q on four cells:

    * two *overlap* cells, router weights (overlap, 1-overlap) and its mirror, outcome frequency
      q + delta, together probability ``overlap_mass`` of the level;
    * two *dominant* cells, router weights (1, 0) and (0, 1), outcome frequency q - eps with
      eps = delta * overlap_mass / (1 - overlap_mass), so the level balances.

    Every expert is calibrated on its routing-weighted view, and the soft and hard aggregates (both
    equal to q) are calibrated on P; yet eta(Z) != p(Z) configuration by configuration, so a
    configuration reweighting that favours overlap breaks calibration (Prop. 4.1). Levels get equal
    probability."""
    lv = to_numpy(list(levels), "levels")
    check_ndim(lv, 1, "levels", "prediction levels")
    if lv.size == 0 or len(np.unique(np.round(lv, LEVEL_DECIMALS))) != lv.size:
        raise ValueError("levels: must be a non-empty list of distinct values")
    if not 0.5 < overlap < 1:
        raise ValueError(f"overlap: must lie in (0.5, 1) so the router still has an argmax, got {overlap!r}")
    if not 0 < overlap_mass < 1:
        raise ValueError(f"overlap_mass: must lie in (0, 1), got {overlap_mass!r}")
    check_positive(delta, "delta")
    eps = delta * overlap_mass / (1 - overlap_mass)
    if (lv + delta > 1).any() or (lv - eps < 0).any() or (lv <= 0).any() or (lv >= 1).any():
        raise ValueError(f"levels: every level q needs q + delta <= 1 and q - eps >= 0 (delta={delta}, eps={eps:.4g})")
    per_level = 1.0 / lv.size
    cells = [
        (r, eta, mass * per_level, (q, q), kind)
        for q in lv
        for r, eta, mass, kind in (
            ((overlap, 1 - overlap), q + delta, overlap_mass / 2, "overlap"),
            ((1 - overlap, overlap), q + delta, overlap_mass / 2, "overlap"),
            ((1.0, 0.0), q - eps, (1 - overlap_mass) / 2, "dominant"),
            ((0.0, 1.0), q - eps, (1 - overlap_mass) / 2, "dominant"),
        )
    ]
    r, eta, pi, f, kind = zip(*cells)
    return RoutedPopulation(
        pi=np.array(pi), eta=np.array(eta), routing=np.array(r), experts=np.array(f), kind=np.array(kind, dtype=object)
    )


def calibrated_experts(pi: object, eta: object, routing: object, groups: object) -> np.ndarray:
    """Expert predictions calibrated on their routing-weighted views by construction.

    ``groups`` (N, K) integer: expert k reports, on every cell of group g, the routing-weighted mean
    f = sum pi r_k eta / sum pi r_k over that group's cells, so E[r_k (Y - f_k) | f_k = v] = 0 for
    every level v (groups that happen to share a value merge harmlessly). Groups with no routing
    weight get their plain pi-weighted mean (irrelevant to the mixture). Pass one-hot ``routing`` to
    get experts calibrated on hard routing regions (section 3)."""
    p, e, r, g = np.asarray(pi), np.asarray(eta), np.asarray(routing), np.asarray(groups)
    f = np.zeros_like(r)
    for k in range(r.shape[1]):
        for gid in np.unique(g[:, k]):
            m = g[:, k] == gid
            w = p[m] * r[m, k]
            f[m, k] = (w * e[m]).sum() / w.sum() if w.sum() > 0 else (p[m] * e[m]).sum() / max(p[m].sum(), 1e-300)
    return f


def random_population(
    n_cells: int = 60, num_experts: int = 3, n_groups: int = 4, routing: str = "soft", seed: int = 0
) -> RoutedPopulation:
    """A random population (Dirichlet cell probabilities and router weights, uniform outcome
    frequencies, a random group per expert) whose experts are calibrated by :func:`calibrated_experts`
    on routing-weighted views (``"soft"``) or hard routing regions (``"hard"``)."""
    check_choice(routing, ROUTINGS, "routing")
    for name, value in (("n_cells", n_cells), ("num_experts", num_experts), ("n_groups", n_groups)):
        check_int(value, name)
    rng = np.random.default_rng(seed)
    pi = rng.dirichlet(np.ones(n_cells))
    eta = rng.uniform(0.05, 0.95, n_cells)
    r = rng.dirichlet(np.full(num_experts, 0.7), n_cells)
    groups = rng.integers(0, n_groups, (n_cells, num_experts))
    weights = r if routing == "soft" else hard_routing(r)
    f = calibrated_experts(pi, eta, weights, groups)
    return RoutedPopulation(pi=pi, eta=eta, routing=r, experts=f, kind=np.array([routing] * n_cells, dtype=object))


# --- Calibration of the experts on P --------------------------------------------------------------


def expert_residuals(pop: RoutedPopulation, routing: str = "soft") -> pd.DataFrame:
    """Expert calibration on routing-weighted views (section 4.1): one row per (expert, level v)
    with ``weight`` = E[r_k 1{f_k = v}] and ``residual`` = E[r_k (Y - f_k) | f_k = v] / E[r_k | f_k = v].

    All residuals are 0 when every expert is calibrated on its view; ``routing="hard"`` uses the
    one-hot router (calibration on regions, section 3)."""
    w = pop.weights(routing)
    rows = []
    for k in range(pop.num_experts):
        lv = np.round(pop.experts[:, k], LEVEL_DECIMALS)
        for v in np.unique(lv):
            m = lv == v
            mass = (pop.pi[m] * w[m, k]).sum()
            if mass <= 0:
                continue
            res = (pop.pi[m] * w[m, k] * (pop.eta[m] - pop.experts[m, k])).sum() / mass
            rows.append({"expert": k + 1, "level": float(v), "weight": float(mass), "residual": float(res)})
    return pd.DataFrame(rows)


def disagreement_identity(pop: RoutedPopulation) -> dict[str, float]:
    """Both sides of E[(eta - p) p] = E[sum_k r_k (f_k - p)^2], which holds whenever every expert is
    calibrated on its routing-weighted view (soft routing; derivation in the module docstring)."""
    p = pop.prediction("soft")
    lhs = float((pop.pi * (pop.eta - p) * p).sum())
    disagreement = (pop.routing * (pop.experts - p[:, None]) ** 2).sum(axis=1)
    return {"covariance": lhs, "disagreement": float((pop.pi * disagreement).sum())}
