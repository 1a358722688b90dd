"""The 2-D mixture of four Gaussians of paper 2 (Sec. 5.1 and Fig. 3): the paper's generator is
not public; this one is ours, chosen to match Figure 3's picture."""

from __future__ import annotations

import numpy as np

from lib.validation import check_int

# The paper's generator is not public. We fix four equally likely clusters in 2-D; the class of a
# point is its cluster (class c = cluster c + 1, so 4 classes). Clusters 2 and 3 (classes 1, 2)
# overlap strongly (Bhattacharyya distance 0.16, pairwise Bayes error ~0.29); clusters 1 and 4
# (classes 0, 3) sit on opposite sides and are nearly separable from each other and from 2/3.
# The experts are oracles on clusters 3 and 4, so deferring pays inside the 2/3 overlap.
GAUSSIAN_MEANS: np.ndarray = np.array([[-4.0, 3.0], [0.0, 0.0], [0.8, 0.6], [4.5, -3.0]], dtype=np.float64)
GAUSSIAN_COVS: np.ndarray = np.array(
    [[[0.8, 0.2], [0.2, 0.6]], [[1.0, 0.3], [0.3, 0.9]], [[0.9, -0.2], [-0.2, 1.0]], [[0.7, 0.0], [0.0, 0.8]]],
    dtype=np.float64,
)
GAUSSIAN_WEIGHTS: np.ndarray = np.full(4, 0.25)


def gaussian_mixture(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw ``n`` points of the mixture (L2D paper Sec. 5.1, Fig. 3): ``(X (n, 2), y, cluster)``,
    the class of a point its 0-based cluster."""
    check_int(n, "n")
    rng = np.random.default_rng(seed)
    cluster = rng.choice(len(GAUSSIAN_WEIGHTS), size=n, p=GAUSSIAN_WEIGHTS)
    chol = np.linalg.cholesky(GAUSSIAN_COVS)
    eps = rng.standard_normal((n, 2))
    X = GAUSSIAN_MEANS[cluster] + np.einsum("nij,nj->ni", chol[cluster], eps)
    return X.astype(np.float32), cluster.astype(np.int64), cluster.astype(np.int64)
