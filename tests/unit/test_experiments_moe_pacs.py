"""Tests of lib.experiments.moe_pacs: which backbone a PACS scale gets on a machine, and what the
page and the records then say about it."""

from __future__ import annotations

import pytest

import lib.backbones as backbones
import lib.pretrained as pre
from lib.config import settings
from lib.experiments.moe_pacs import pacs_backbone


@pytest.fixture()
def machine(monkeypatch: pytest.MonkeyPatch):
    def set_(hub: bool, lite: bool) -> None:
        monkeypatch.setattr(backbones, "imagenet_weights_available", lambda: hub)
        monkeypatch.setattr(pre, "lite0_weights_path", lambda: pre.Path("/w.pth") if lite else None)
    return set_


def test_cpu_scale_offline_freezes_the_packaged_efficientnet(machine) -> None:
    machine(hub=False, lite=True)
    b = pacs_backbone(settings("pacs", "cpu"))
    assert (b.spec, b.pretrained, b.frozen, b.init) == ("imagenet_efficientnet_lite0", True, True, "pretrained")
    assert "EfficientNet-Lite0" in b.label and "ResNet-18" in b.differs and "frozen" in b.differs
    assert b.train_changes() == {"backbone": "features:efficientnet_lite0", "pretrained": True, "augment": False}


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
