"""Meta-Cal (Ma & Blaschko, ICML 2021): post-hoc calibration by ranking, the two non-accuracy-preserving
calibrators of paper 4's Table 4 (MetaMis and MetaAcc).

A binary "ranker" sorts examples by the entropy of their softmax, :math:`h(x) = H(\\mathrm{softmax}(z))`:
an example with :math:`h(x) \\ge \\tau` is rejected and given the uniform distribution :math:`1/K`; the
others are temperature-scaled with a temperature fitted (by NLL) on the accepted calibration examples
only. The threshold :math:`\\tau` is chosen under one of two constraints:

* **miscoverage** (MetaMis, level :math:`\\alpha`): at most a share :math:`\\alpha` of the correctly
  classified examples is rejected: :math:`\\tau` is the :math:`1 - \\alpha` quantile ("higher") of the
  entropy of a random draw of correctly classified calibration examples (a tenth of them, at most 500);
* **coverage accuracy** (MetaAcc, level :math:`a`): the accepted examples are right with probability
  about :math:`a` or more: on a random draw of the calibration examples (a tenth, at most 500) cut into 20 equal-mass
  entropy bins, the running mean of the bins' accuracies, from the most certain bin on, is mapped to
  the bins' mean entropy by a decreasing isotonic regression, read at :math:`a` (a mean entropy,
  inside the bin, so the cut is conservative).

The temperature is fitted on the calibration examples outside the draw. Paper 4 uses
:math:`\\alpha = 0.05` and, on CIFAR-10, :math:`a = 0.97`, raised by 0.005 until the regression is
defined there (its released evaluation code).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import softmax
from scipy.stats import entropy
from sklearn.isotonic import IsotonicRegression

from lib.calibration.posthoc import TemperatureScaler
from lib.validation import ArrayLike, check_choice, check_logits_labels, check_open_unit, to_int_array, to_numpy

CONSTRAINTS: tuple[str, ...] = ("miscoverage", "accuracy")
"""MetaMis bounds the share of correct examples rejected; MetaAcc the accuracy of those accepted."""

RANK_DRAW_MAX = 500
"""At most this many calibration examples (a tenth of them) choose the threshold."""

ACCURACY_BINS = 20
"""Equal-mass entropy bins of MetaAcc's accuracy curve."""


class UnreachableLevel(ValueError):
    """MetaAcc's coverage accuracy is out of reach on the given logits at every level up to 1."""


@dataclass(frozen=True)
class MetaCal:
    """A fitted Meta-Cal calibrator: the entropy ``threshold`` (examples at or above it are rejected),
    the ``temperature`` of the accepted ones, its ``constraint`` and the ``level`` it was fitted at."""

    threshold: float
    temperature: float
    constraint: str
    level: float

    def accepted(self, logits: ArrayLike) -> np.ndarray:
        """Whether each example's softmax entropy is below the threshold."""
        z = to_numpy(logits, "logits")
        return entropy(softmax(z, axis=1), axis=1) < self.threshold

    def predict(self, logits: ArrayLike) -> np.ndarray:
        """Calibrated probabilities: ``softmax(z / temperature)`` where accepted, ``1/K`` elsewhere."""
        z = to_numpy(logits, "logits")
        out = np.full(z.shape, 1.0 / z.shape[1])
        keep = self.accepted(z)
        out[keep] = softmax(z[keep] / self.temperature, axis=1)
        return out


def _draw(n: int, pool: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A random draw of ``n`` of ``pool`` indices and the rest."""
    order = rng.permutation(pool)
    return order[:n], order[n:]


def _accuracy_threshold(h: np.ndarray, correct: np.ndarray, level: float) -> float:
    """MetaAcc's threshold on the draw's entropies ``h``: NaN where the accuracy curve never reaches ``level``."""
    cuts = np.quantile(h, np.linspace(0, 1, ACCURACY_BINS + 1))
    accs, ents = [], []
    for a, b in zip(cuts[:-1], cuts[1:]):
        inside = (h > a) & (h <= b)
        accs.append(float(correct[inside].mean()) if inside.any() else 0.0)
        ents.append(float(h[inside].mean()) if inside.any() else 0.0)
    running = np.cumsum(accs) / np.arange(1, len(accs) + 1)
    return float(IsotonicRegression(increasing=False).fit(running, ents).predict([level])[0])


def fit_metacal(
    logits: ArrayLike, labels: ArrayLike, constraint: str, level: float, seed: int = 0, step: float = 0.005
) -> MetaCal:
    """Fit Meta-Cal on calibration ``logits`` (N, K) and ``labels`` under ``constraint`` at ``level``
    (the miscoverage rate alpha, or the coverage accuracy a). Under "accuracy", a level the accuracy
    curve does not reach is raised by ``step`` until it does (paper 4's protocol); :class:`UnreachableLevel`
    (a ``ValueError``) when no level up to 1 works. ``seed`` draws the threshold's examples."""
    check_choice(constraint, CONSTRAINTS, "constraint")
    check_open_unit(level, "level")
    z = to_numpy(logits, "logits")
    y = to_int_array(labels, "labels")
    check_logits_labels(z, y)
    rng = np.random.default_rng(seed)
    correct = z.argmax(1) == y
    h = entropy(softmax(z, axis=1), axis=1)
    if constraint == "miscoverage":
        right = np.flatnonzero(correct)
        draw, rest = _draw(min(len(right) // 10, RANK_DRAW_MAX), len(right), rng)
        if len(draw) == 0:
            raise ValueError(
                f"logits: {len(right)} correctly classified examples are too few to rank (need at least 10)"
            )
        threshold = float(np.quantile(h[right[draw]], 1 - level, method="higher"))
        fit_on = np.concatenate([right[rest], np.flatnonzero(~correct)])
    else:
        draw, fit_on = _draw(min(len(y) // 10, RANK_DRAW_MAX), len(y), rng)
        if len(draw) < ACCURACY_BINS:
            raise ValueError(f"logits: {len(y)} examples are too few to rank (need {10 * ACCURACY_BINS})")
        threshold = _accuracy_threshold(h[draw], correct[draw], level)
        while np.isnan(threshold) and level + step <= 1.0:
            level = round(level + step, 10)
            threshold = _accuracy_threshold(h[draw], correct[draw], level)
        if np.isnan(threshold):
            raise UnreachableLevel(
                "level: the coverage accuracy is out of reach on these logits at every level up to 1"
            )
    keep = fit_on[h[fit_on] < threshold]
    if len(keep) == 0:
        raise ValueError(f"level: no calibration example is accepted at {constraint} level {level}")
    temperature = TemperatureScaler("nll").fit(z[keep], y[keep]).temperature
    return MetaCal(threshold, float(temperature), constraint, float(level))
