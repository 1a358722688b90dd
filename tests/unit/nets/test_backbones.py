"""Tests of lib.nets.backbones: shapes, architecture facts and parameter counts known from the papers, and
the offline behaviour (clear error or fallback) of the pretrained backbones."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lib.data.text import tokenize
from lib.nets import backbones
from lib.nets.backbones import cifar_resnet18, imagenet_resnet18, mlp, text_encoder


def _n_params(m: torch.nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


@pytest.fixture()
def offline_hub(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """No network and an empty Hugging Face cache, whatever this machine has cached."""
    import huggingface_hub.constants as hf_constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True, raising=False)
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path / "hub"), raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))


def test_cifar_resnet18_shape_and_architecture() -> None:
    torch.manual_seed(0)
    net = cifar_resnet18().eval()
    assert net.out_features == 256
    assert net.conv1.kernel_size == (3, 3) and net.conv1.stride == (1, 1)
    assert not any(isinstance(m, torch.nn.MaxPool2d) for m in net.modules())
    seen = {}
    net.layer3.register_forward_hook(lambda m, i, o: seen.update(shape=tuple(o.shape)))
    with torch.no_grad():
        out = net(torch.randn(2, 3, 32, 32))
    assert out.shape == (2, 256)
    assert seen["shape"] == (2, 256, 8, 8)  # two stride-2 stages: 32 -> 8
    # Same weights as torchvision's ResNet-18 stages 1-3 with a 3x3 stem (7x7 stem: 3*64*49).
    from torchvision.models import resnet18

    ref = resnet18()
    ref_count = sum(_n_params(getattr(ref, n)) for n in ("bn1", "layer1", "layer2", "layer3")) + 3 * 64 * 9
    assert _n_params(net) == ref_count


def test_cifar_resnet18_width_scales_channels() -> None:
    net = cifar_resnet18(width=8)
    assert net.out_features == 32
    assert net(torch.randn(3, 3, 32, 32)).shape == (3, 32)
    with pytest.raises(ValueError, match="width"):
        cifar_resnet18(width=0)


def test_mlp_is_four_layers() -> None:
    net = mlp(2, num_classes=6)
    linears = [m for m in net.modules() if isinstance(m, torch.nn.Linear)]
    assert len(linears) == 4
    assert _n_params(net) == (2 * 100 + 100) + 2 * (100 * 100 + 100) + (100 * 6 + 6)
    assert net(torch.randn(5, 2)).shape == (5, 6)
    assert net.out_features == 6
    with pytest.raises(ValueError, match="hidden"):
        mlp(2, hidden=(100, -1), num_classes=6)


def test_imagenet_resnet18_offline_raises_clear_error(offline_hub: None) -> None:
    with pytest.raises(RuntimeError) as info:
        imagenet_resnet18(pretrained=True)
    msg = str(info.value)
    assert "unavailable" in msg
    assert "timm/resnet18.a1_in1k" in msg
    assert "HF_HUB_OFFLINE" in msg
    assert "allow_random_init=True" in msg


def test_imagenet_resnet18_random_init_gives_512_features(offline_hub: None) -> None:
    with pytest.warns(RuntimeWarning, match="random"):
        net = imagenet_resnet18(pretrained=True, allow_random_init=True)
    assert net.out_features == 512 and net.pretrained is False
    assert "random init" in net.name
    net.eval()
    with torch.no_grad():
        assert net(torch.randn(2, 3, 64, 64)).shape == (2, 512)
    # The ImageNet stem: 7x7 stride-2 conv and a max-pool.
    assert net.conv1.kernel_size == (7, 7) and net.conv1.stride == (2, 2)
    assert isinstance(net.maxpool, torch.nn.MaxPool2d)


def test_text_encoder_offline_fallback_embeds(offline_hub: None) -> None:
    with pytest.warns(RuntimeWarning, match="MiniLM"):
        enc = text_encoder("distilbert-base-uncased", fallback=True)
    assert enc.out_features == 384
    assert "MiniLM" in enc.name and enc.pooling == "mean"
    texts = ["The cat sat on the mat.", "A cat is sitting on a mat.", "Stock markets fell sharply today."]
    batch = tokenize(texts, enc.tokenizer, max_length=32)
    assert batch["input_ids"].shape[0] == 3 and batch["input_ids"].shape[1] <= 32
    with torch.no_grad():
        emb = enc(**batch)
        hidden = enc.model(**batch).last_hidden_state
    assert emb.shape == (3, 384)
    # Mean pooling by definition: average of the token states over the attention mask.
    m = batch["attention_mask"].unsqueeze(-1).float()
    assert torch.allclose(emb, (hidden * m).sum(1) / m.sum(1), atol=1e-5)
    # A pretrained sentence model puts paraphrases closer than unrelated sentences.
    e = F.normalize(emb, dim=1)
    assert (e[0] @ e[1]) > (e[0] @ e[2]) + 0.2


def test_text_encoder_without_fallback_raises(offline_hub: None) -> None:
    with pytest.raises(RuntimeError, match="fallback"):
        text_encoder("distilbert-base-uncased", fallback=False)
    with pytest.raises(ValueError, match="name"):
        text_encoder("")


def test_no_hf_progress_bars_is_scoped():
    """Inside the block transformers shows no progress bars; afterwards the setting is restored."""
    from transformers.utils import logging as hf_logging

    from lib.nets.text import no_hf_progress_bars

    hf_logging.enable_progress_bar()
    with no_hf_progress_bars():
        assert not hf_logging.is_progress_bar_enabled()
    assert hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    with no_hf_progress_bars():
        pass
    assert not hf_logging.is_progress_bar_enabled()  # a user's choice stays as it was
    hf_logging.enable_progress_bar()


def test_resolve_imagenet_prefers_the_papers_weights_then_the_packaged_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    import lib.nets.pretrained as pre

    monkeypatch.setattr(backbones, "imagenet_weights_available", lambda: True)
    assert backbones.resolve_imagenet("imagenet_resnet18", True) == ("imagenet_resnet18", True)
    monkeypatch.setattr(backbones, "imagenet_weights_available", lambda: False)
    monkeypatch.setattr(pre, "lite0_weights_path", lambda: None)
    assert backbones.resolve_imagenet("imagenet_resnet18", True) == ("imagenet_resnet18", False)  # never "pretrained"
    monkeypatch.setattr(pre, "lite0_weights_path", lambda: pre.Path("/x.pth"))
    assert backbones.resolve_imagenet("imagenet_resnet18", True) == ("imagenet_efficientnet_lite0", True)
    assert backbones.resolve_imagenet("imagenet_resnet18", False) == ("imagenet_resnet18", False)
    assert backbones.resolve_imagenet("tiny_cnn", False) == ("tiny_cnn", False)
    with pytest.raises(ValueError, match="pretrained"):
        backbones.resolve_imagenet("imagenet_resnet18", "yes")  # type: ignore[arg-type]


def test_build_knows_the_offline_imagenet_backbone_and_feature_input(monkeypatch: pytest.MonkeyPatch) -> None:
    import lib.nets.pretrained as pre

    monkeypatch.setattr(pre, "lite0_weights_path", lambda: None)
    with pytest.warns(RuntimeWarning, match="absent"):
        net = backbones.build("imagenet_efficientnet_lite0", pretrained=True)
    assert net.pretrained is False and net.out_features == 1280  # recorded as random init
    head = backbones.build("features:efficientnet_lite0", num_classes=7)
    assert head(torch.zeros(3, 2 * 1280)).shape == (3, 7)
    assert backbones.weights_available("tiny_cnn") is False


def test_family_names_the_kind_of_every_spec() -> None:
    from lib.nets.backbones import BACKBONES, family

    got = {s: family(s) for s in BACKBONES}
    assert got == {
        "tiny_cnn": "cifar",
        "cifar_resnet18": "cifar",
        "resnet18": "cifar",
        "imagenet_resnet18": "imagenet",
        "imagenet_efficientnet_lite0": "imagenet",
        "features:<extractor>": "features",
        "tail:efficientnet_lite0:<size>": "features",
        "wrn-<depth>-<k>": "wrn",
        "text:<name>": "text",
    }


def test_build_names_a_bad_tail_spec() -> None:
    from lib.nets.backbones import build

    net = build("tail:efficientnet_lite0:64", num_classes=7)
    assert net(torch.zeros(2, 320 * 2 * 2)).shape == (2, 7)
    for bad in ("tail:efficientnet_lite0", "tail:resnet18:224", "tail:efficientnet_lite0:x"):
        with pytest.raises(ValueError, match="spec: .* is not 'tail:efficientnet_lite0:<image size>'"):
            build(bad)
