"""Simulated experts for multi-expert learning to defer (paper 2, Sec. 5.2-5.4): correct with one
probability on a region (classes or Gaussian clusters), another elsewhere, a uniform other class when
wrong; the noise is a counter-based hash of (seed, example id), the same on every call."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lib.validation import ArrayLike, check_labels, check_ndim, check_same_length, to_numpy

# --- Synthetic experts with per-example seeded noise ----------------------------------------------
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
    """A simulated expert: correct with probability ``p_in`` on its ``region`` (of classes; on the
    Gaussians a cluster is its class) and 1/K elsewhere (random over all classes, the papers' random
    expert); when wrong it names one of the other K - 1 classes uniformly."""

    num_classes: int
    region: frozenset[int] = field(default_factory=frozenset)
    p_in: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.num_classes, (int, np.integer)) or self.num_classes < 2:
            raise ValueError(f"num_classes: must be an integer >= 2, got {self.num_classes!r}")
        if not (np.isfinite(self.p_in) and 0.0 <= self.p_in <= 1.0):
            raise ValueError(f"p_in: must lie in [0, 1], got {self.p_in!r}")
        object.__setattr__(self, "region", frozenset(int(c) for c in self.region))

    def __call__(self, labels: ArrayLike, index: ArrayLike | None = None) -> np.ndarray:
        """Predictions (N,) for true ``labels``; ``index`` = example ids (default 0..N-1) that key
        the noise."""
        y = to_numpy(labels, "labels", dtype=None)
        check_labels(y, self.num_classes, "labels")
        y = y.astype(np.int64)
        idx = np.arange(len(y)) if index is None else to_numpy(index, "index", dtype=np.int64)
        check_ndim(idx, 1, "index", "one integer id per example")
        check_same_length(y, idx, "labels", "index")
        if len(idx) and idx.min() < 0:
            raise ValueError("index: example ids must be non-negative")
        correct = _uniforms(self.seed, idx, 0) < np.where(
            np.isin(y, list(self.region)), self.p_in, 1.0 / self.num_classes
        )
        # A wrong answer: shift the label by 1..K-1, uniformly, so it never equals y.
        shift = 1 + np.minimum(
            (_uniforms(self.seed, idx, 1) * (self.num_classes - 1)).astype(np.int64), self.num_classes - 2
        )
        wrong = (y + shift) % self.num_classes
        return np.where(correct, y, wrong)
