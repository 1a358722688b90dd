"""Multi-expert learning to defer (L2D): surrogate losses, expert-correctness estimators, synthetic
experts and the 2-D mixture-of-Gaussians data (L2D paper, section 5).

Paper: "Calibration of multi-expert learning to defer" (papers/l2d-multi-expert-calibration.txt).
A model outputs K + J logits: g_1..g_K for the classes and g_{⊥1}..g_{⊥J} for deferring to expert j.
Two consistent surrogates train it: the softmax surrogate of Mozannar & Sontag (2020) and the
one-vs-all (OvA) surrogate of Verma & Nalisnick (2022). Their estimators of the probability that
expert j is correct, P(m_j = y | x), differ: the softmax one (eq. 2) couples all experts and can
exceed 1; the OvA one (eq. 3) is a sigmoid of a single logit.

Used in: notebooks/l2d_gaussians, notebooks/l2d_cifar10.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from lib.validation import (
    reduce_loss,
    ArrayLike,
    check_choice,
    check_finite,
    check_labels,
    check_ndim,
    check_same_length,
    to_numpy,
    to_tensor,
)

__all__ = [
    "softmax_l2d_loss",
    "ova_l2d_loss",
    "expert_correctness_softmax",
    "expert_correctness_ova",
    "defer_decisions",
    "system_accuracy",
    "coverage_per_expert",
    "expert_calibration_error",
    "SyntheticExpert",
    "oracle_expert",
    "random_expert",
    "probabilistic_expert",
    "specialized_expert",
    "make_experts",
    "expert_predictions",
    "expert_correctness",
    "EXPERT_SETTINGS",
    "GAUSSIAN_MEANS",
    "GAUSSIAN_COVS",
    "GAUSSIAN_WEIGHTS",
    "gaussian_mixture",
]

# --------------------------------------------------------------------------------------------
# Input handling
# --------------------------------------------------------------------------------------------
def _logits(logits: ArrayLike) -> torch.Tensor:
    x = to_tensor(logits, "logits")
    if not x.is_floating_point():
        x = x.to(torch.get_default_dtype())
    check_ndim(x, 2, "logits", "N examples x (K classes + J experts)")
    check_finite(x, "logits")
    return x


def _check_num_classes(num_classes: int, width: int) -> int:
    if not isinstance(num_classes, (int, np.integer)) or isinstance(num_classes, bool):
        raise ValueError(f"num_classes: must be an integer, got {num_classes!r}")
    if not 1 <= num_classes < width:
        raise ValueError(
            f"num_classes: must lie in [1, {width - 1}] so that logits ({width} columns) hold at "
            f"least one deferral logit, got {num_classes}"
        )
    return int(num_classes)


def _loss_inputs(
    logits: ArrayLike, labels: ArrayLike, expert_correct: ArrayLike
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Validate (logits (N, K+J), labels (N,), expert_correct (N, J)); return them and K."""
    z = _logits(logits)
    ec = to_tensor(expert_correct, "expert_correct")
    check_ndim(ec, 2, "expert_correct", "N examples x J experts, 1 where expert j is correct")
    check_finite(ec, "expert_correct")
    if ec.dtype != torch.bool:
        vals = ec.detach()
        if not bool(((vals == 0) | (vals == 1)).all()):
            raise ValueError("expert_correct: values must be boolean (0/1)")
    n, width = z.shape
    j = ec.shape[1]
    if j < 1 or j >= width:
        raise ValueError(
            f"expert_correct: has {j} columns (experts) but logits has {width} columns; "
            "need 1 <= J < K + J"
        )
    k = width - j
    y = to_tensor(labels, "labels")
    check_labels(y, k, "labels")
    check_same_length(z, y, "logits", "labels")
    check_same_length(z, ec, "logits", "expert_correct")
    return z, y.long().to(z.device), ec.to(device=z.device, dtype=z.dtype), k


# --------------------------------------------------------------------------------------------
# Surrogate losses
# --------------------------------------------------------------------------------------------
def softmax_l2d_loss(
    logits: ArrayLike, labels: ArrayLike, expert_correct: ArrayLike, reduction: str = "mean"
) -> torch.Tensor:
    """Softmax L2D surrogate (Mozannar & Sontag 2020, multi-expert form, L2D paper Sec. 2):

    -log softmax(g)_y - sum_j 1[m_j = y] log softmax(g)_{⊥j}, softmax over all K + J outputs.

    ``logits`` (N, K+J), ``labels`` (N,), ``expert_correct`` (N, J) bool; K = columns - J.
    Returns the batch mean (``reduction="sum"`` or ``"none"`` for the sum or per-example losses).
    Used in: notebooks/l2d_gaussians, notebooks/l2d_cifar10.
    """
    z, y, ec, k = _loss_inputs(logits, labels, expert_correct)
    logp = F.log_softmax(z, dim=1)
    loss = -logp.gather(1, y[:, None]).squeeze(1) - (ec * logp[:, k:]).sum(dim=1)
    return reduce_loss(loss, reduction)


def ova_l2d_loss(
    logits: ArrayLike, labels: ArrayLike, expert_correct: ArrayLike, reduction: str = "mean"
) -> torch.Tensor:
    """One-vs-all L2D surrogate (Verma & Nalisnick 2022, multi-expert form, L2D paper Sec. 2):

    phi(g_y) + sum_{k != y} phi(-g_k) + sum_j phi(-g_{⊥j}) + sum_j 1[m_j = y](phi(g_{⊥j}) - phi(-g_{⊥j}))

    with the logistic loss phi(t) = log(1 + exp(-t)) = softplus(-t). The deferral part equals a
    binary logistic loss of g_{⊥j} against the event "expert j is correct".
    Used in: notebooks/l2d_gaussians, notebooks/l2d_cifar10.
    """
    z, y, ec, k = _loss_inputs(logits, labels, expert_correct)
    g_cls, g_def = z[:, :k], z[:, k:]
    target = F.one_hot(y, k).to(z.dtype)
    sign = 2 * target - 1  # +1 for the true class, -1 for the others
    cls = F.softplus(-sign * g_cls).sum(dim=1)
    dfr = (F.softplus(-g_def) * ec + F.softplus(g_def) * (1 - ec)).sum(dim=1)
    return reduce_loss(cls + dfr, reduction)


# --------------------------------------------------------------------------------------------
# Estimators of expert correctness and deferral decisions
# --------------------------------------------------------------------------------------------
def expert_correctness_softmax(logits: ArrayLike, num_classes: int) -> torch.Tensor:
    """Softmax estimate of P(m_j = y | x) = p_{⊥j} / (1 - sum_j' p_{⊥j'}) (L2D paper eq. 2).

    Unclipped: it exceeds 1 when the deferral probabilities sum close to 1 (clip only inside ECE).
    Computed stably as exp(g_{⊥j} - logsumexp_k g_k), because 1 - sum_j' p_{⊥j'} is the total
    class probability sum_k p_k. Returns an (N, J) tensor (inf only if that ratio overflows).
    Used in: notebooks/l2d_gaussians, notebooks/l2d_cifar10.
    """
    z = _logits(logits)
    k = _check_num_classes(num_classes, z.shape[1])
    return torch.exp(z[:, k:] - torch.logsumexp(z[:, :k], dim=1, keepdim=True))


def expert_correctness_ova(logits: ArrayLike, num_classes: int) -> torch.Tensor:
    """OvA estimate of P(m_j = y | x) = sigmoid(g_{⊥j}) (L2D paper eq. 3); (N, J), always in (0, 1).

    Used in: notebooks/l2d_gaussians, notebooks/l2d_cifar10.
    """
    z = _logits(logits)
    k = _check_num_classes(num_classes, z.shape[1])
    return torch.sigmoid(z[:, k:])


def defer_decisions(logits: ArrayLike, num_classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Classifier prediction and deferral choice (L2D paper Sec. 2, rejector r(x)).

    Returns ``(pred_class, defer_to)``: pred_class = argmax_k g_k; defer_to = argmax_j g_{⊥j} if
    max_j g_{⊥j} >= max_k g_k, else -1. A tie defers, as in the paper's Bayes rejector (App. B):
    r*(x) = 0 only if P(y = h*(x) | x) > P(m_j' = y | x) for every j', otherwise argmax_j.
    Among tied experts the first (lowest j) is chosen.
    Used in: notebooks/l2d_gaussians, notebooks/l2d_cifar10.
    """
    z = _logits(logits)
    k = _check_num_classes(num_classes, z.shape[1])
    cls_max, pred = z[:, :k].max(dim=1)
    def_max, who = z[:, k:].max(dim=1)
    defer_to = torch.where(def_max >= cls_max, who, torch.full_like(who, -1))
    return pred, defer_to


def system_accuracy(
    logits: ArrayLike, labels: ArrayLike, expert_preds: ArrayLike, num_classes: int
) -> float:
    """Accuracy of the human-AI system: the classifier's prediction, or the chosen expert's
    prediction where the model defers (L2D paper Sec. 5, Fig. 1 b/e).

    ``expert_preds`` (N, J) integer predictions of the J experts.
    Used in: notebooks/l2d_gaussians, notebooks/l2d_cifar10.
    """
    z = _logits(logits)
    k = _check_num_classes(num_classes, z.shape[1])
    y = to_tensor(labels, "labels")
    check_labels(y, k, "labels")
    check_same_length(z, y, "logits", "labels")
    if z.shape[0] == 0:
        raise ValueError("logits: is empty (0 examples); the system accuracy of no examples is undefined")
    m = to_tensor(expert_preds, "expert_preds")
    check_ndim(m, 2, "expert_preds", "N examples x J experts")
    check_same_length(z, m, "logits", "expert_preds")
    check_finite(m, "expert_preds")
    check_labels(m.reshape(-1), k, "expert_preds")  # integer class predictions in range
    if m.shape[1] != z.shape[1] - k:
        raise ValueError(
            f"expert_preds: has {m.shape[1]} columns but logits hold {z.shape[1] - k} deferral logits"
        )
    pred, defer_to = defer_decisions(z, k)
    m = m.to(z.device).long()
    chosen = m.gather(1, defer_to.clamp_min(0)[:, None]).squeeze(1)
    final = torch.where(defer_to >= 0, chosen, pred)
    return float((final == y.to(z.device).long()).double().mean().item())


def coverage_per_expert(logits: ArrayLike, num_classes: int) -> np.ndarray:
    """Fractions of examples each decision-maker handles: an array of length J + 1 whose entry 0
    is the classifier's coverage and entry j (1..J) the fraction deferred to expert j; sums to 1.

    Used in: notebooks/l2d_gaussians, notebooks/l2d_cifar10.
    """
    z = _logits(logits)
    k = _check_num_classes(num_classes, z.shape[1])
    _, defer_to = defer_decisions(z, k)
    counts = np.bincount(defer_to.cpu().numpy() + 1, minlength=z.shape[1] - k + 1)
    return counts / max(len(defer_to), 1)


def expert_calibration_error(
    estimates: ArrayLike, expert_correct: ArrayLike, n_bins: int = 20, binning: str = "width"
) -> float:
    """Mean over experts of the binned ECE of the correctness estimate vs actual correctness
    (L2D paper Sec. 5; the reference code uses 20 bins). Estimates above 1 (softmax eq. 2) are
    clipped to 1 inside the ECE, as in the paper. ``estimates`` and ``expert_correct`` are (N, J).
    Used in: notebooks/l2d_gaussians, notebooks/l2d_cifar10.
    """
    from lib.metrics import binary_ece

    est = to_numpy(estimates, "estimates")
    ok = to_numpy(expert_correct, "expert_correct")
    check_ndim(est, 2, "estimates", "N examples x J experts")
    check_ndim(ok, 2, "expert_correct", "N examples x J experts")
    if est.shape != ok.shape:
        raise ValueError(f"estimates and expert_correct: shapes differ ({est.shape} vs {ok.shape})")
    if np.isnan(est).any():
        raise ValueError("estimates: contains NaN values")
    est = np.clip(est, 0.0, 1.0)  # +inf (an overflowed eq. 2) clips to 1 as well
    return float(np.mean([binary_ece(est[:, j], ok[:, j], n_bins, binning) for j in range(est.shape[1])]))


# --------------------------------------------------------------------------------------------
# Synthetic experts with per-example seeded noise
# --------------------------------------------------------------------------------------------
_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser (Steele et al. 2014): a bijective mix of 64-bit integers."""
    with np.errstate(over="ignore"):
        x = (x + np.uint64(0x9E3779B97F4A7C15)) & _MASK64
        x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _MASK64
        x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _MASK64
        return x ^ (x >> np.uint64(31))


def _uniforms(seed: int, index: np.ndarray, stream: int) -> np.ndarray:
    """Uniform numbers in [0, 1) that depend only on (seed, example index, stream): a counter-based
    hash, so the same example gets the same noise on every call, in any order or batch."""
    key = _splitmix64(np.asarray([seed & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64))
    key = _splitmix64(key ^ np.uint64(stream))
    h = _splitmix64(index.astype(np.uint64) ^ key)
    h = _splitmix64(h)
    return (h >> np.uint64(11)).astype(np.float64) / float(2**53)


@dataclass(frozen=True)
class SyntheticExpert:
    """A simulated expert: correct with probability ``p_in`` on its ``region`` and ``p_out``
    elsewhere; when wrong it names a class drawn uniformly from the other K - 1 classes.

    The region is a set of classes (or of groups, e.g. Gaussian clusters, when ``group`` is passed
    to ``__call__``). "Random over all K classes" (the papers' random expert) is the same
    distribution as p = 1/K with uniform wrong answers, so ``p_out = 1/K`` gives it.
    Noise depends only on (seed, example index), so repeated calls agree (the reference code redraws
    it on every call, so runs are reproducible).
    Used in: notebooks/l2d_gaussians, notebooks/l2d_cifar10.
    """

    num_classes: int
    region: frozenset[int] = field(default_factory=frozenset)
    p_in: float = 1.0
    p_out: float | None = None  # None -> 1 / num_classes (random over all classes)
    seed: int = 0
    name: str = "expert"

    def __post_init__(self) -> None:
        if not isinstance(self.num_classes, (int, np.integer)) or self.num_classes < 2:
            raise ValueError(f"num_classes: must be an integer >= 2, got {self.num_classes!r}")
        for nm, v in (("p_in", self.p_in), ("p_out", self.p_out_value)):
            if not (np.isfinite(v) and 0.0 <= v <= 1.0):
                raise ValueError(f"{nm}: must lie in [0, 1], got {v!r}")
        object.__setattr__(self, "region", frozenset(int(c) for c in self.region))

    @property
    def p_out_value(self) -> float:
        return 1.0 / self.num_classes if self.p_out is None else float(self.p_out)

    def _inputs(
        self, labels: ArrayLike, index: ArrayLike | None, group: ArrayLike | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        y = to_numpy(labels, "labels", dtype=None)
        check_labels(y, self.num_classes, "labels")
        y = y.astype(np.int64)
        idx = np.arange(len(y)) if index is None else to_numpy(index, "index", dtype=np.int64)
        check_ndim(idx, 1, "index", "one integer id per example")
        check_same_length(y, idx, "labels", "index")
        if len(idx) and idx.min() < 0:
            raise ValueError("index: example ids must be non-negative")
        g = y if group is None else to_numpy(group, "group", dtype=np.int64)
        check_ndim(g, 1, "group", "one group (e.g. cluster) id per example")
        check_same_length(y, g, "labels", "group")
        return y, idx, g

    def correct_prob(self, labels: ArrayLike, group: ArrayLike | None = None) -> np.ndarray:
        """The true P(m = y | x) for each example: p_in inside the region, p_out outside."""
        y, _, g = self._inputs(labels, None, group)
        inside = np.isin(g, list(self.region))
        return np.where(inside, self.p_in, self.p_out_value)

    def __call__(
        self, labels: ArrayLike, index: ArrayLike | None = None, group: ArrayLike | None = None
    ) -> np.ndarray:
        """Predictions (N,) for true ``labels``; ``index`` = example ids (default 0..N-1) that key
        the noise; ``group`` = region ids (default: the labels)."""
        y, idx, g = self._inputs(labels, index, group)
        inside = np.isin(g, list(self.region))
        p = np.where(inside, self.p_in, self.p_out_value)
        correct = _uniforms(self.seed, idx, 0) < p
        # A wrong answer: shift the label by 1..K-1, uniformly, so it never equals y.
        shift = 1 + np.minimum((_uniforms(self.seed, idx, 1) * (self.num_classes - 1)).astype(np.int64),
                               self.num_classes - 2)
        wrong = (y + shift) % self.num_classes
        return np.where(correct, y, wrong)


def oracle_expert(num_classes: int, lo: int, hi: int, seed: int = 0) -> SyntheticExpert:
    """Oracle on the classes lo..hi-1 (``hi`` exclusive), random over all classes elsewhere.

    Exclusive upper end: "the first five classes" of CIFAR-10 are classes 0..4, i.e.
    ``oracle_expert(10, 0, 5)``. The reference code tests ``y <= k``, which with k = 5 would cover
    six classes (0..5); we follow the paper's text. Pass ``hi = k + 1`` to reproduce ``y <= k``.
    """
    if not 0 <= lo < hi <= num_classes:
        raise ValueError(f"lo, hi: need 0 <= lo < hi <= num_classes ({num_classes}), got {lo}, {hi}")
    return SyntheticExpert(num_classes, frozenset(range(lo, hi)), 1.0, None, seed, f"oracle[{lo},{hi})")


def random_expert(num_classes: int, seed: int = 0) -> SyntheticExpert:
    """Uniformly random over all classes: correct with probability 1/K everywhere."""
    return SyntheticExpert(num_classes, frozenset(), 1.0, None, seed, "random")


def probabilistic_expert(
    num_classes: int, classes: Sequence[int], p_in: float, p_out: float | None = None, seed: int = 0
) -> SyntheticExpert:
    """Correct with probability ``p_in`` on ``classes`` and ``p_out`` (default 1/K: random) elsewhere."""
    return SyntheticExpert(num_classes, frozenset(classes), p_in, p_out, seed, f"p={p_in:g}")


def specialized_expert(num_classes: int, j: int, seed: int = 0) -> SyntheticExpert:
    """Oracle on the class pair {2j, 2j+1} (0-based j), random elsewhere (L2D paper Sec. 5.4).

    The paper writes j = 1..5 with classes {2j, 2j+1}; on CIFAR-10's 0-based classes 0..9 that only fits
    with 0-based j = 0..4, which is what we use (expert j+1 of the paper is oracle on {2j, 2j+1}).
    """
    if not 0 <= 2 * j + 1 < num_classes:
        raise ValueError(f"j: class pair {{{2 * j}, {2 * j + 1}}} is outside 0..{num_classes - 1}")
    return SyntheticExpert(num_classes, frozenset({2 * j, 2 * j + 1}), 1.0, None, seed, f"special{{{2*j},{2*j+1}}}")


EXPERT_SETTINGS = ("oracle", "dependence", "specialized", "gaussian", "gaussian_dependence")


def make_experts(
    kind: str,
    num_experts: int = 1,
    num_classes: int = 10,
    p: float = 0.95,
    seed: int = 0,
) -> list[SyntheticExpert]:
    """The paper's expert committees (L2D paper Sec. 5.2-5.4); expert j gets seed ``seed + j`` so
    the experts' noise is independent.

    * ``"oracle"``: ``num_experts`` (1..8) experts, each an oracle on the first five classes
      (0..4, exclusive upper end, see ``oracle_expert``) and random over all classes otherwise.
    * ``"dependence"``: 4 experts: expert 0 random, experts 1..3 correct with probability ``p``
      (paper: 0.2..0.95) on the first five classes, random otherwise. ``p`` is the correctness
      probability itself (the reference code's "p then random" would give p + (1 - p)/K).
    * ``"specialized"``: ``num_experts`` (1..5) experts, expert j an oracle on {2j, 2j+1}.
    * ``"gaussian"``: the mixture-of-Gaussians committee: ``num_experts`` oracles on clusters 3 and 4
      (0-based classes 2, 3; class = cluster - 1, see ``gaussian_mixture``), random elsewhere.
    * ``"gaussian_dependence"``: 1 random + 3 experts correct with probability ``p`` on clusters 3, 4.

    Used in: notebooks/l2d_gaussians, notebooks/l2d_cifar10.
    """
    check_choice(kind, EXPERT_SETTINGS, "kind")
    if not isinstance(num_experts, (int, np.integer)) or num_experts < 1:
        raise ValueError(f"num_experts: must be a positive integer, got {num_experts!r}")
    if not (np.isfinite(p) and 0 <= p <= 1):
        raise ValueError(f"p: must lie in [0, 1], got {p!r}")
    if kind.startswith("gaussian"):
        num_classes = len(GAUSSIAN_MEANS)
        region = [2, 3]
    else:
        region = list(range(5))
        if num_classes < 5:
            raise ValueError(f"num_classes: the {kind!r} setting needs at least 5 classes")
    if kind in ("oracle", "gaussian"):
        return [probabilistic_expert(num_classes, region, 1.0, None, seed + j) for j in range(num_experts)]
    if kind in ("dependence", "gaussian_dependence"):
        return [random_expert(num_classes, seed)] + [
            probabilistic_expert(num_classes, region, p, None, seed + j) for j in range(1, 4)
        ]
    if num_experts > num_classes // 2:
        raise ValueError(f"num_experts: at most {num_classes // 2} specialized experts for {num_classes} classes")
    return [specialized_expert(num_classes, j, seed + j) for j in range(num_experts)]


def expert_predictions(
    experts: Sequence[SyntheticExpert],
    labels: ArrayLike,
    index: ArrayLike | None = None,
    group: ArrayLike | None = None,
) -> np.ndarray:
    """Stack the experts' predictions into an (N, J) integer array."""
    if len(experts) == 0:
        raise ValueError("experts: need at least one expert")
    return np.stack([e(labels, index, group) for e in experts], axis=1)


def expert_correctness(expert_preds: ArrayLike, labels: ArrayLike) -> np.ndarray:
    """(N, J) bool array 1[m_j = y] from expert predictions (N, J) and labels (N,)."""
    m = to_numpy(expert_preds, "expert_preds", dtype=np.int64)
    y = to_numpy(labels, "labels", dtype=np.int64)
    check_ndim(m, 2, "expert_preds", "N examples x J experts")
    check_ndim(y, 1, "labels")
    check_same_length(m, y, "expert_preds", "labels")
    return m == y[:, None]


# --------------------------------------------------------------------------------------------
# The 2-D mixture of Gaussians (L2D paper Sec. 5.1 and Fig. 3)
# --------------------------------------------------------------------------------------------
# The paper's generator is not public. We fix four equally likely clusters in 2-D; the class of a
# point is its cluster (class c = cluster c + 1, so 4 classes). Clusters 2 and 3 (classes 1, 2)
# overlap strongly (Bhattacharyya distance 0.16, pairwise Bayes error ~0.29); clusters 1 and 4
# (classes 0, 3) sit on opposite sides and are nearly separable from each other and from 2/3.
# The experts are oracles on clusters 3 and 4, so deferring pays inside the 2/3 overlap.
GAUSSIAN_MEANS: np.ndarray = np.array(
    [[-4.0, 3.0], [0.0, 0.0], [0.8, 0.6], [4.5, -3.0]], dtype=np.float64
)
GAUSSIAN_COVS: np.ndarray = np.array(
    [
        [[0.8, 0.2], [0.2, 0.6]],
        [[1.0, 0.3], [0.3, 0.9]],
        [[0.9, -0.2], [-0.2, 1.0]],
        [[0.7, 0.0], [0.0, 0.8]],
    ],
    dtype=np.float64,
)
GAUSSIAN_WEIGHTS: np.ndarray = np.full(4, 0.25)


def gaussian_mixture(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw ``n`` points of the 4-cluster 2-D mixture of Gaussians (L2D paper Sec. 5.1, Fig. 3).

    Returns ``(X (n, 2) float32, y (n,) int64, cluster (n,) int64)`` with 0-based cluster ids and
    y = cluster (the class of a point is the cluster it came from). Means, covariances and weights
    are the module constants ``GAUSSIAN_MEANS``, ``GAUSSIAN_COVS``, ``GAUSSIAN_WEIGHTS``.
    Used in: notebooks/l2d_gaussians.
    """
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n: must be a positive integer, got {n!r}")
    rng = np.random.default_rng(seed)
    cluster = rng.choice(len(GAUSSIAN_WEIGHTS), size=n, p=GAUSSIAN_WEIGHTS)
    chol = np.linalg.cholesky(GAUSSIAN_COVS)
    eps = rng.standard_normal((n, 2))
    X = GAUSSIAN_MEANS[cluster] + np.einsum("nij,nj->ni", chol[cluster], eps)
    return X.astype(np.float32), cluster.astype(np.int64), cluster.astype(np.int64)
