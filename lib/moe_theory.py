"""Hard vs soft routing with calibrated experts, on finite populations (no training).

Paper: "Calibrated mixture-of-experts under distribution shift" (papers/calibrated-moe-under-shift.txt),
sections 3-4 and Appendices A, C (multiaccuracy bound) and D.6 (Table 5). Binary prediction, as in the paper's
analysis: a population is a finite set of input *cells* i with probability ``pi_i``, outcome
frequency ``eta_i = P(Y=1 | cell i)``, router weights ``r_i`` (K,) and expert predictions
``f_i`` (K,) of P(Y=1). The routing configuration of a cell is Z_i = (r_i, f_i) (eq. 3).

* soft mixture p_i = sum_k r_ik f_ik; hard mixture p_i = f_{i, argmax_k r_ik} (section 3.1);
* expert k is calibrated on its routing-weighted view when E[r_k (Y - f_k) | f_k = v] = 0 for every
  level v (section 4.1; under hard routing r is one-hot, so this is calibration on region k);
* a test distribution Q with dQ/dP = rho. A *region reweighting* (section 3.2) has
  rho = omega_k / P(region k) on region k; a *configuration reweighting* (Prop. 4.1) has rho = rho(Z);
* eq. (4): for a configuration reweighting, the calibration residual of the aggregate at level q is::

      E_Q[Y - p | p = q] = E_P[rho(Z) (eta(Z) - q) | p = q] / E_P[rho(Z) | p = q].

A consequence used to build the example (derived here, not stated in the paper): if every expert
is calibrated on its routing-weighted view, summing E[r_k (Y - f_k) f_k] = 0 over k gives::

      E[(Y - p) p] = E[D],   D = sum_k r_k (f_k - p)^2   (routing-weighted disagreement),

so if the soft aggregate is also calibrated (E[(Y - p) p] = 0), co-routed experts must agree almost
surely. The two configurations of :func:`two_configuration_example` therefore differ in their
routing weights, not in what the experts say; see :func:`disagreement_identity`.

Used in: notebooks/routing_theory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from lib.validation import check_choice, check_finite, check_ndim, check_positive, check_same_length, to_numpy

ROUTINGS: tuple[str, ...] = ("soft", "hard")
_DECIMALS = 10  # prediction levels are matched after rounding to this many decimals

__all__ = [
    "RoutedPopulation",
    "two_configuration_example",
    "random_population",
    "calibrated_experts",
    "hard_routing",
    "expert_residuals",
    "calibration_residuals",
    "region_reweighting",
    "configuration_reweighting",
    "entropy_tilt",
    "predicted_gap",
    "predicted_gap_closed_form",
    "sample",
    "measured_gap",
    "disagreement_identity",
    "multiaccuracy_bound",
    "support_claims",
]


# ----------------------------------------------------------------------------------------------
# Populations
# ----------------------------------------------------------------------------------------------


def hard_routing(routing: object) -> np.ndarray:
    """One-hot argmax of router weights (N, K) (ties go to the lowest expert index), section 3.1."""
    r = to_numpy(routing, "routing")
    check_ndim(r, 2, "routing", "N cells x K experts")
    check_finite(r, "routing")
    out = np.zeros_like(r)
    out[np.arange(r.shape[0]), r.argmax(axis=1)] = 1.0
    return out


@dataclass(frozen=True)
class RoutedPopulation:
    """A finite population of input cells with a router and K experts (binary outcome).

    ``pi`` (N,) cell probabilities (sum 1), ``eta`` (N,) P(Y=1 | cell), ``routing`` (N, K) soft router
    weights (rows on the simplex), ``experts`` (N, K) expert predictions of P(Y=1), ``kind`` (N,) a
    label per cell for display (e.g. "overlap", "dominant").
    """

    pi: np.ndarray
    eta: np.ndarray
    routing: np.ndarray
    experts: np.ndarray
    kind: np.ndarray = field(default_factory=lambda: np.array([], dtype=object))

    def __post_init__(self) -> None:
        pi, eta = to_numpy(self.pi, "pi"), to_numpy(self.eta, "eta")
        r, f = to_numpy(self.routing, "routing"), to_numpy(self.experts, "experts")
        check_ndim(pi, 1, "pi", "one probability per cell")
        check_ndim(eta, 1, "eta", "one outcome frequency per cell")
        check_ndim(r, 2, "routing", "N cells x K experts")
        check_ndim(f, 2, "experts", "N cells x K experts")
        for name, arr in (("pi", pi), ("eta", eta), ("routing", r), ("experts", f)):
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
        kind = np.asarray(self.kind, dtype=object)
        if kind.size == 0:
            kind = np.array(["cell"] * len(pi), dtype=object)
        check_same_length(pi, kind, "pi", "kind")
        for name, arr in (("pi", pi), ("eta", eta), ("routing", r), ("experts", f), ("kind", kind)):
            object.__setattr__(self, name, arr)

    @property
    def num_experts(self) -> int:
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
        for k in range(self.num_experts):
            cols[f"r{k + 1}"] = self.routing[:, k]
        for k in range(self.num_experts):
            cols[f"f{k + 1}"] = self.experts[:, k]
        cols["p_soft"] = self.prediction("soft")
        cols["p_hard"] = self.prediction("hard")
        return pd.DataFrame(cols)


def two_configuration_example(
    levels: Sequence[float] = (0.2, 0.4, 0.6, 0.8),
    overlap: float = 0.6,
    overlap_mass: float = 0.5,
    delta: float = 0.1,
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
    probability. Used in: notebooks/routing_theory.
    """
    lv = to_numpy(list(levels), "levels")
    check_ndim(lv, 1, "levels", "prediction levels")
    if lv.size == 0 or len(np.unique(np.round(lv, _DECIMALS))) != lv.size:
        raise ValueError("levels: must be a non-empty list of distinct values")
    if not 0.5 < overlap < 1:
        raise ValueError(f"overlap: must lie in (0.5, 1) so the router still has an argmax, got {overlap!r}")
    if not 0 < overlap_mass < 1:
        raise ValueError(f"overlap_mass: must lie in (0, 1), got {overlap_mass!r}")
    check_positive(delta, "delta")
    eps = delta * overlap_mass / (1 - overlap_mass)
    if (lv + delta > 1).any() or (lv - eps < 0).any() or (lv <= 0).any() or (lv >= 1).any():
        raise ValueError(
            f"levels: every level q needs q + delta <= 1 and q - eps >= 0 (delta={delta}, eps={eps:.4g})"
        )
    rows_r, rows_eta, rows_pi, rows_f, kinds = [], [], [], [], []
    per_level = 1.0 / lv.size
    for q in lv:
        for r, eta, mass, kind in (
            ((overlap, 1 - overlap), q + delta, overlap_mass / 2, "overlap"),
            ((1 - overlap, overlap), q + delta, overlap_mass / 2, "overlap"),
            ((1.0, 0.0), q - eps, (1 - overlap_mass) / 2, "dominant"),
            ((0.0, 1.0), q - eps, (1 - overlap_mass) / 2, "dominant"),
        ):
            rows_r.append(r)
            rows_eta.append(eta)
            rows_pi.append(mass * per_level)
            rows_f.append((q, q))
            kinds.append(kind)
    return RoutedPopulation(
        pi=np.array(rows_pi), eta=np.array(rows_eta), routing=np.array(rows_r), experts=np.array(rows_f),
        kind=np.array(kinds, dtype=object),
    )


def calibrated_experts(
    pi: object, eta: object, routing: object, groups: object
) -> np.ndarray:
    """Expert predictions calibrated on their routing-weighted views by construction.

    ``groups`` (N, K) integer: expert k reports, on every cell of group g, the routing-weighted mean
    f = sum pi r_k eta / sum pi r_k over that group's cells, so E[r_k (Y - f_k) | f_k = v] = 0 for
    every level v (groups that happen to share a value merge harmlessly). Groups with no routing
    weight get their plain pi-weighted mean (irrelevant to the mixture). Pass one-hot ``routing`` to
    get experts calibrated on hard routing regions (section 3).
    """
    p, e = to_numpy(pi, "pi"), to_numpy(eta, "eta")
    r = to_numpy(routing, "routing")
    g = to_numpy(groups, "groups", dtype=np.int64)
    check_ndim(r, 2, "routing", "N cells x K experts")
    if g.shape != r.shape:
        raise ValueError(f"groups: expected shape {r.shape} like routing, got {g.shape}")
    check_same_length(p, r, "pi", "routing")
    check_same_length(e, r, "eta", "routing")
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
    """A random population whose experts are calibrated (on routing-weighted views for ``"soft"``,
    on hard routing regions for ``"hard"``), built with :func:`calibrated_experts`.

    Cells get Dirichlet probabilities, uniform outcome frequencies, Dirichlet router weights and a
    random group per expert. Used in: notebooks/routing_theory, tests of this module.
    """
    check_choice(routing, ROUTINGS, "routing")
    for name, value in (("n_cells", n_cells), ("num_experts", num_experts), ("n_groups", n_groups)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name}: must be a positive integer, got {value!r}")
    rng = np.random.default_rng(seed)
    pi = rng.dirichlet(np.ones(n_cells))
    eta = rng.uniform(0.05, 0.95, n_cells)
    r = rng.dirichlet(np.full(num_experts, 0.7), n_cells)
    groups = rng.integers(0, n_groups, (n_cells, num_experts))
    weights = r if routing == "soft" else hard_routing(r)
    f = calibrated_experts(pi, eta, weights, groups)
    return RoutedPopulation(pi=pi, eta=eta, routing=r, experts=f, kind=np.array([routing] * n_cells, dtype=object))


# ----------------------------------------------------------------------------------------------
# Residuals and reweightings
# ----------------------------------------------------------------------------------------------


def _check_pop(pop: RoutedPopulation) -> None:
    if not isinstance(pop, RoutedPopulation):
        raise ValueError(f"pop: expected a RoutedPopulation, got {type(pop).__name__}")


def _rho(pop: RoutedPopulation, rho: object | None) -> np.ndarray:
    if rho is None:
        return np.ones_like(pop.pi)
    w = to_numpy(rho, "rho")
    check_ndim(w, 1, "rho", "one density ratio per cell")
    check_finite(w, "rho")
    check_same_length(pop.pi, w, "pop.pi", "rho")
    if (w < 0).any():
        raise ValueError("rho: density ratios must be non-negative")
    if (pop.pi * w).sum() <= 0:
        raise ValueError("rho: gives the population zero mass")
    return w


def expert_residuals(pop: RoutedPopulation, routing: str = "soft") -> pd.DataFrame:
    """Expert calibration on routing-weighted views (section 4.1): one row per (expert, level v)
    with ``weight`` = E[r_k 1{f_k = v}] and ``residual`` = E[r_k (Y - f_k) | f_k = v] / E[r_k | f_k = v].

    All residuals are 0 when every expert is calibrated on its view; ``routing="hard"`` uses the
    one-hot router (calibration on regions, section 3).

    Used in: notebooks/routing_theory.
    """
    _check_pop(pop)
    w = pop.weights(routing)
    rows = []
    for k in range(pop.num_experts):
        lv = np.round(pop.experts[:, k], _DECIMALS)
        for v in np.unique(lv):
            m = lv == v
            mass = (pop.pi[m] * w[m, k]).sum()
            if mass <= 0:
                continue
            res = (pop.pi[m] * w[m, k] * (pop.eta[m] - pop.experts[m, k])).sum() / mass
            rows.append({"expert": k + 1, "level": float(v), "weight": float(mass), "residual": float(res)})
    return pd.DataFrame(rows)


def calibration_residuals(pop: RoutedPopulation, routing: str = "soft", rho: object | None = None) -> pd.DataFrame:
    """Aggregate calibration on Q (dQ/dP = ``rho``, default P): one row per prediction level q with
    ``mass`` = Q(p = q), ``outcome_rate`` = E_Q[Y | p = q] and ``residual`` = E_Q[Y - p | p = q],
    computed exactly from the population (no sampling).

    Used in: notebooks/routing_theory.
    """
    _check_pop(pop)
    w = _rho(pop, rho)
    q = pop.pi * w
    q = q / q.sum()
    p = np.round(pop.prediction(routing), _DECIMALS)
    rows = []
    for level in np.unique(p):
        m = p == level
        mass = q[m].sum()
        if mass <= 0:
            continue
        rate = (q[m] * pop.eta[m]).sum() / mass
        rows.append({"level": float(level), "mass": float(mass), "outcome_rate": float(rate),
                     "residual": float(rate - level)})
    return pd.DataFrame(rows)


def region_reweighting(pop: RoutedPopulation, omega: object) -> np.ndarray:
    """Density ratio of the region reweighting Q = sum_k omega_k P(. | region k) (section 3.2):
    rho = omega_k / P(region k) on region k. ``omega`` (K,) new region prevalences (sum 1; regions
    with P(region) = 0 must get omega 0).

    Used in: notebooks/routing_theory.
    """
    _check_pop(pop)
    om = to_numpy(omega, "omega")
    check_ndim(om, 1, "omega", "one prevalence per expert")
    check_finite(om, "omega")
    if om.shape[0] != pop.num_experts:
        raise ValueError(f"omega: expected {pop.num_experts} prevalences, got {om.shape[0]}")
    if (om < 0).any() or abs(om.sum() - 1) > 1e-9:
        raise ValueError("omega: must be non-negative and sum to 1")
    region = pop.regions()
    prev = np.array([pop.pi[region == k].sum() for k in range(pop.num_experts)])
    if ((prev == 0) & (om > 0)).any():
        raise ValueError("omega: puts mass on a region the population never visits")
    ratio = np.divide(om, prev, out=np.zeros_like(om), where=prev > 0)
    return ratio[region]


def configuration_reweighting(
    pop: RoutedPopulation, fn: Callable[[np.ndarray, np.ndarray], np.ndarray]
) -> np.ndarray:
    """Density ratio rho(Z) of a configuration reweighting (Prop. 4.1): ``fn(routing, experts)``
    maps (N, K) router weights and expert predictions to (N,) non-negative values, normalised so that
    E_P[rho] = 1. Being a function of Z = (r, f), it leaves P(Y | Z) unchanged.

    Used in: notebooks/routing_theory.
    """
    _check_pop(pop)
    if not callable(fn):
        raise ValueError("fn: must be callable as fn(routing, experts)")
    raw = _rho(pop, np.asarray(fn(pop.routing, pop.experts), dtype=np.float64))
    return raw / (pop.pi * raw).sum()


def entropy_tilt(beta: float) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """rho(Z) proportional to exp(beta * H(r)), H the routing entropy in nats: beta > 0 shifts mass
    toward routing-overlap configurations (section 4.2's routing-induced reweighting).

    Used in: notebooks/routing_theory.
    """
    if not np.isfinite(beta):
        raise ValueError(f"beta: must be a finite number, got {beta!r}")

    def fn(routing: np.ndarray, experts: np.ndarray) -> np.ndarray:
        r = np.clip(routing, 0, 1)
        h = -np.where(r > 0, r * np.log(np.where(r > 0, r, 1)), 0.0).sum(axis=1)
        return np.exp(beta * h)

    return fn


def predicted_gap(pop: RoutedPopulation, rho: object, routing: str = "soft") -> pd.DataFrame:
    """Eq. (4): the calibration residual on Q predicted from P alone, per prediction level q,
    E_P[rho (eta - q) | p = q] / E_P[rho | p = q], with ``p_mass`` = P(p = q) and ``q_mass`` = Q(p = q).

    Used in: notebooks/routing_theory.
    """
    _check_pop(pop)
    w = _rho(pop, rho)
    p = np.round(pop.prediction(routing), _DECIMALS)
    total = (pop.pi * w).sum()
    rows = []
    for level in np.unique(p):
        m = p == level
        pm = pop.pi[m].sum()
        num = (pop.pi[m] * w[m] * (pop.eta[m] - level)).sum() / pm
        den = (pop.pi[m] * w[m]).sum() / pm
        if den <= 0:
            continue
        rows.append({"level": float(level), "p_mass": float(pm), "q_mass": float(den * pm / total),
                     "predicted": float(num / den)})
    return pd.DataFrame(rows)


def predicted_gap_closed_form(overlap_mass: float, delta: float, ratio: float) -> float:
    """Eq. (4) in closed form for :func:`two_configuration_example` when overlap cells get density
    ratio ``ratio`` times that of dominant cells: with m = overlap_mass and eps = delta m / (1 - m),
    gap = (ratio m delta - (1 - m) eps) / (ratio m + 1 - m) = m delta (ratio - 1) / (ratio m + 1 - m),
    the same at every level.

    Used in: notebooks/routing_theory.
    """
    if not 0 < overlap_mass < 1:
        raise ValueError(f"overlap_mass: must lie in (0, 1), got {overlap_mass!r}")
    check_positive(delta, "delta")
    check_positive(ratio, "ratio")
    m = overlap_mass
    return m * delta * (ratio - 1) / (ratio * m + 1 - m)


# ----------------------------------------------------------------------------------------------
# Sampling: measure what eq. (4) predicts
# ----------------------------------------------------------------------------------------------


def sample(pop: RoutedPopulation, n: int, rho: object | None = None, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``n`` examples from Q (dQ/dP = ``rho``): cell indices and outcomes Y ~ Bernoulli(eta).

    Used in: notebooks/routing_theory.
    """
    _check_pop(pop)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n: must be a positive integer, got {n!r}")
    w = _rho(pop, rho)
    q = pop.pi * w
    rng = np.random.default_rng(seed)
    cells = rng.choice(len(q), size=n, p=q / q.sum())
    y = (rng.random(n) < pop.eta[cells]).astype(np.int64)
    return cells, y


def measured_gap(pop: RoutedPopulation, cells: object, y: object, routing: str = "soft") -> pd.DataFrame:
    """Empirical calibration residual per prediction level from a sample: ``measured`` = mean(Y) - q
    over the sampled examples predicting q, with its standard error ``se`` and count ``n``.

    Used in: notebooks/routing_theory.
    """
    _check_pop(pop)
    c = to_numpy(cells, "cells", dtype=np.int64)
    yy = to_numpy(y, "y")
    check_ndim(c, 1, "cells")
    check_same_length(c, yy, "cells", "y")
    if c.size and (c.min() < 0 or c.max() >= len(pop.pi)):
        raise ValueError("cells: indices out of range")
    if not np.isin(yy, (0, 1)).all():
        raise ValueError("y: outcomes must be 0 or 1")
    p = np.round(pop.prediction(routing), _DECIMALS)[c]
    rows = []
    for level in np.unique(p):
        m = p == level
        k = int(m.sum())
        rate = float(yy[m].mean())
        rows.append({"level": float(level), "n": k, "measured": rate - float(level),
                     "se": float(np.sqrt(max(rate * (1 - rate), 1e-12) / k))})
    return pd.DataFrame(rows)


def disagreement_identity(pop: RoutedPopulation) -> dict[str, float]:
    """Both sides of E[(eta - p) p] = E[sum_k r_k (f_k - p)^2], which holds whenever every expert is
    calibrated on its routing-weighted view (soft routing; derivation in the module docstring).

    Used in: notebooks/routing_theory.
    """
    _check_pop(pop)
    p = pop.prediction("soft")
    lhs = float((pop.pi * (pop.eta - p) * p).sum())
    disagreement = (pop.routing * (pop.experts - p[:, None]) ** 2).sum(axis=1)
    return {"covariance": lhs, "disagreement": float((pop.pi * disagreement).sum())}


# ----------------------------------------------------------------------------------------------
# Appendix C: multiaccuracy bound; Appendix D.6 / Table 5 verdicts
# ----------------------------------------------------------------------------------------------


def multiaccuracy_bound(pop: RoutedPopulation, rho: object | None = None, routing: str = "soft") -> pd.DataFrame:
    """Appendix C on a finite population, under Q with dQ/dP = ``rho`` (default P), binary labels.

    For every expert k and auditor a = r_k h with h: cells -> [-1, 1], Cauchy-Schwarz gives
    ``|E_Q[a (Y - p)]| <= sqrt(E_Q[a^2]) sqrt(E_Q[(Y - p)^2]) <= sqrt(E_Q[(Y - p)^2])`` (as ``|a| <= 1``), and
    (Y - p)^2 <= -log p_Y (binary cross-entropy) tightens nothing but lets the robust CE bound it.
    Within a cell E[Y - p] = eta - p and E[(Y - p)^2] = (eta - p)^2 + eta (1 - eta), so the worst
    auditor is h = sign(eta - p) and the left side is E_Q[r_k |eta - p|]. One row per expert:
    ``alignment`` (that worst case), ``cauchy_schwarz`` (sqrt(E_Q[r_k^2]) sqrt(E_Q[(Y-p)^2])),
    ``squared_residual`` (sqrt(E_Q[(Y-p)^2])) and ``cross_entropy`` (sqrt(E_Q[-log p_Y])); the
    bound holds when each column is <= the next. Used in: notebooks/routing_theory.
    """
    _check_pop(pop)
    check_choice(routing, ROUTINGS, "routing")
    q = pop.pi * _rho(pop, rho)
    q = q / q.sum()
    p = pop.prediction(routing)
    if ((p <= 0) | (p >= 1)).any():
        raise ValueError("pop: aggregate predictions must lie in (0, 1) for the cross-entropy bound")
    eta = pop.eta
    sq = float((q * ((eta - p) ** 2 + eta * (1 - eta))).sum())
    ce = float((q * -(eta * np.log(p) + (1 - eta) * np.log(1 - p))).sum())
    r = pop.weights(routing)
    rows = []
    for k in range(pop.num_experts):
        rows.append({
            "expert": k + 1,
            "alignment": float((q * r[:, k] * np.abs(eta - p)).sum()),
            "cauchy_schwarz": float(np.sqrt((q * r[:, k] ** 2).sum()) * np.sqrt(sq)),
            "squared_residual": float(np.sqrt(sq)),
            "cross_entropy": float(np.sqrt(ce)),
        })
    return pd.DataFrame(rows)


def support_claims(support: pd.DataFrame, paper: pd.DataFrame, lam: float = 2.0, tol: float = 0.05) -> list[dict[str, str]]:
    """Table 5's two checkable statements, with verdicts computed from ``support`` (columns ``lam``,
    ``perplexity``, ``fraction``, ``ratio_bound``: lib.robust.effective_support averaged per lambda)
    against the paper's ``paper`` (lib.experiments.moe.PAPER_TABLE5):

    * the effective fraction falls monotonically in lambda ("the mapping is monotone and smooth");
    * at ``lam`` the fraction is within ``tol`` of the paper's (72.8% at lambda = 2).

    Returns claim rows for lib.report.claims_table. Used in: notebooks/routing_theory.
    """
    for name, df, cols in (("support", support, ("lam", "fraction", "perplexity", "ratio_bound")),
                           ("paper", paper, ("lam", "fraction", "perplexity", "ratio_bound"))):
        if not isinstance(df, pd.DataFrame) or not set(cols) <= set(df.columns) or df.empty:
            raise ValueError(f"{name}: expected a non-empty DataFrame with columns {cols}")
    check_positive(tol, "tol")
    s = support.sort_values("lam")
    steps = np.diff(s["fraction"].to_numpy())
    mono = bool((steps < 0).all())
    ours = s.set_index("lam")
    ref = paper.set_index("lam")
    if lam not in ours.index or lam not in ref.index:
        raise ValueError(f"lam: {lam} must be a lambda of both support and paper")
    o, pp = ours.loc[lam], ref.loc[lam]
    close = abs(float(o["fraction"]) - float(pp["fraction"])) <= tol
    return [
        {"claim": "the effective support falls monotonically as lambda grows (Table 5)",
         "paper": "\"the mapping is monotone and smooth in [lambda]\" (App. D.6)",
         "ours": f"fractions {', '.join(f'{v:.3f}' for v in s['fraction'])} at lambda {', '.join(f'{v:g}' for v in s['lam'])}",
         "verdict": "held" if mono else "did not hold"},
        {"claim": f"lambda = {lam:g} keeps about {float(pp['fraction']):.0%} effective support at n = 128",
         "paper": f"Table 5: {float(pp['perplexity']):.1f}/128 = {float(pp['fraction']):.1%}, ratio {float(pp['ratio_bound']):.1f}",
         "ours": f"simulated losses: {float(o['perplexity']):.1f}/128 = {float(o['fraction']):.1%}, ratio "
                 f"{float(o['ratio_bound']):.2f} (held if within {tol:.0%} of the paper's)",
         "verdict": "held" if close else "did not hold"},
    ]
