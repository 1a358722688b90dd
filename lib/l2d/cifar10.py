"""Paper 2's CIFAR-10 study (Sec. 5.1-5.4, Figure 1, bottom row; Figure 2): one cached run per
(experiment, value, surrogate, seed) on paper 4's images and backbone (:mod:`lib.nets.image_training`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from lib.engine.cache import cached_run
from lib.nets import image_training as rx
from lib.l2d import experiment as ex
from lib.validation import check_choice

CIFAR_KEYS = (*rx.TRAIN_KEYS, "patience")  # the scale's settings of one run (lib.l2d.experiment.point_config)


def run_cifar(
    experiment: str, value: float, surrogate: str, seed: int, cfg: Mapping[str, Any], data: Mapping[str, Any]
) -> dict[str, Any]:
    """One cached run of the CIFAR-10 study: at paper scale (``mode="end_to_end"``) the ``arch``
    (WRN-28-4) with K + J outputs trained end to end (SGD, Nesterov, cosine, early stopping on the
    validation surrogate loss, Sec. 5.1); below it a head on the shared backbone's frozen features."""
    check_choice(surrogate, ex.SURROGATES, "surrogate")
    check_choice(cfg["mode"], ("features", "end_to_end"), "mode")
    config = {**ex.point_config(experiment, value, surrogate, seed, cfg, CIFAR_KEYS), "data": data["tag"]}
    experts = ex.committee(experiment, value, "cifar10", seed)
    k = int(data["num_classes"])

    def annotate(xs: list[Any], ys: list[Any], first: int) -> list[ex.L2DSplit]:
        """Train, validation and test with the experts' predictions (example ids from ``first``, 10**6, 2 * 10**6)."""
        return [ex.annotate(x, y, experts, offset=o) for x, y, o in zip(xs, ys, (first, 10**6, 2 * 10**6))]

    def compute(run: Any) -> dict[str, Any]:
        if cfg["mode"] == "features":
            f, parts = rx.standardize(rx.backbone_features(cfg, data)), ("head", "val", "test")
            tr, va, te = annotate([f[f"{p}_x"] for p in parts], [f[f"{p}_y"] for p in parts], int(cfg["n_backbone"]))
            head = rx.make_head(cfg, tr.x.shape[1], k + len(experts), seed)
            out = ex.train_and_score(head, (tr, va, te), surrogate, cfg, seed, head=True)
            return {**out, "backbone_test_accuracy": f["backbone_test_accuracy"]}
        ys = [data[f"{s}_y"] for s in ("train", "val", "test")]
        tr, va, te = annotate([torch.zeros(len(y), 1) for y in ys], ys, 0)
        train, val = (data["train_x"], tr.targets), (data["val_x"], va.targets)
        settings = {**cfg, "schedule": "cosine", "nesterov": True}
        loss, patience = ex.surrogate_loss(surrogate), int(cfg["patience"])
        net, hist = rx.fit_images(k + len(experts), loss, train, val, settings, run, seed=seed, patience=patience)
        return {**ex.l2d_metrics(rx.predict_logits(net, data["test_x"]), te, surrogate), "history": hist}

    return cached_run("l2d_cifar10", config, compute)
