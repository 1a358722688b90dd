"""Experiments of paper 1 (section 6, Appendix D): the names every paper-1 table uses, the data a
scale asks for, its grid of configs (trained by :func:`lib.moe.grid.run_grid`), the runs' test
predictions pooled for the figures, and the smoke scale's text backbone."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lib.moe.config import TrainConfig
from lib.moe.methods import METHODS
from lib.moe.record import SUBSETS, run_fields
from lib.nets.text import TINY_BERT
from lib.validation import check_choice

METHOD_LABELS: dict[str, str] = {
    "single": "Single Expert",
    "vanilla": "Vanilla MoE",
    "mocae": "MoCaE",
    "fgr": "FGR",
    "robust": "Robust MoE",
    "robust_filtered": "Robust Filtered",
    "fgr_robust": "FGR + Robust",
}
METRICS: tuple[str, ...] = ("accuracy", "ece", "ece_ts")

# TrainConfig fields a notebook's settings may set (scales.toml keys with the same name).
_TRAIN_KEYS: tuple[str, ...] = tuple(
    "dataset epochs batch_size lr weight_decay lam num_experts router_hidden backbone width pretrained "
    "max_length augment threads eval_batch_size".split()
)


def cifar10h_data(cfg: Mapping[str, Any]) -> Any:
    """The CIFAR-10 / CIFAR-10H bundle a scale asks for: the real images (``cfg["data"] == "real"``,
    subsets ``n_train``/``n_test``, 0 meaning all), with ``features`` set their frozen
    EfficientNet-Lite0 activations at ``image_size`` px and ``filtered_copies`` JPEG copies for FGR
    (:func:`lib.features.cifar_features.cifar10h_features`, ``cpu`` scale) or, at smoke scale,
    synthetic images of the same shape."""
    from lib.data.images import load_cifar10h
    from lib.data.synthetic import synthetic_images

    if cfg["data"] == "real":
        images = load_cifar10h(n_train=cfg["n_train"] or None, n_test=cfg["n_test"] or None, seed=0)
        if not cfg.get("features"):
            return images
        from lib.features.cifar_features import cifar10h_features

        return cifar10h_features(images, size=int(cfg["image_size"]), copies=int(cfg.get("filtered_copies", 1)))
    return synthetic_images(n_train=cfg["n_train"], n_val=cfg["n_train"] // 4, n_test=cfg["n_test"], seed=0)


def train_configs(settings: Mapping[str, Any], methods: Sequence[str] | None = None, **changes: Any) -> list[Any]:
    """The :class:`lib.moe.config.TrainConfig` grid of a notebook scale's ``settings``
    (``lib.config.settings``; keys named like TrainConfig fields pass through): every method (default:
    the settings') x seed of the settings, ``changes`` overriding fields, with progress on (a grid
    shows one live line of runs done, epochs and time left, :mod:`lib.engine.progress`, in the book
    build's log too)."""
    if not isinstance(settings, Mapping):
        raise ValueError(f"settings: expected a mapping (lib.config.settings), got {type(settings).__name__}")
    methods = list(methods if methods is not None else settings.get("methods", METHODS))
    seeds = list(settings.get("seeds", [0]))
    for name, values in (("methods", methods), ("seeds", seeds)):
        if not values:
            raise ValueError(f"{name}: is empty")
    for m in methods:
        check_choice(m, METHODS, "methods")
    base = {"progress": True, **{k: settings[k] for k in _TRAIN_KEYS if k in settings}, **changes}
    return [TrainConfig(**{**base, "method": m, "seed": int(s)}) for m in methods for s in seeds]


def top_label(probs: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(confidence, correct) of top-label predictions (``probs`` (N, C), ``labels`` (N,)): what
    reliability diagrams draw."""
    return probs.max(axis=1), (probs.argmax(axis=1) == labels).astype(np.int64)


def pooled_predictions(
    records: Sequence[Mapping[str, Any]], subset: str = "all", all_mask: Any = None
) -> dict[str, dict[str, np.ndarray]]:
    """Test predictions per method pooled over seeds (lib.moe.train.load_predictions): for each method
    label, ``probs``, ``labels``, ``conf``, ``correct`` and ``seed`` on ``subset`` ("all"/"hard").
    ``all_mask`` (the data bundle's, one bool per test point) restricts "all" to the
    natural-proportion sample of a subsampled test set (lib.data.images.natural_test_subset)."""
    from lib.moe.train import load_predictions

    check_choice(subset, SUBSETS, "subset")
    out: dict[str, dict[str, list[np.ndarray]]] = {}
    for r in records:
        run, pred = run_fields(r), load_predictions(r)
        if subset == "hard":
            keep = pred["hard"].astype(bool)
        elif all_mask is None:
            keep = np.ones(len(pred["labels"]), dtype=bool)
        else:
            keep = np.asarray(all_mask, dtype=bool)
            if keep.shape != (len(pred["labels"]),):
                raise ValueError(f"all_mask: expected {len(pred['labels'])} entries, got shape {keep.shape}")
        probs = pred["probs"].astype(np.float64)[keep]
        probs = probs / probs.sum(axis=1, keepdims=True)
        labels = pred["labels"].astype(np.int64)[keep]
        conf, correct = top_label(probs, labels)
        seeds = np.full(len(labels), run["seed"])
        got = {"probs": probs, "labels": labels, "conf": conf, "correct": correct, "seed": seeds}
        d = out.setdefault(METHOD_LABELS.get(run["method"], run["method"]), {k: [] for k in got})
        for k, v in got.items():
            d[k].append(v)
    return {m: {k: np.concatenate(v) for k, v in d.items()} for m, d in out.items()}


TINY_TEXT = "text:" + TINY_BERT  # scales.toml name of the smoke-scale text backbone
