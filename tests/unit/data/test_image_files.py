"""Tests of lib.data.image_files: the raw CIFAR-10 and PACS images, decoded once and cached."""

from __future__ import annotations

import numpy as np
import pytest

from lib.data.image_files import CIFAR10_CLASSES, PACS_DOMAINS, cifar10_arrays, pacs_domain, resolve_pacs_domain
from lib.data.locate import shared_data_dir

SHARED = shared_data_dir()
HAS_CIFAR = (SHARED / "cifar10" / "cifar10-jpeg.zip").exists()
HAS_PACS = (SHARED / "pacs" / "photo").is_dir()


@pytest.mark.skipif(not HAS_PACS, reason="PACS not in ../shared/data")
def test_pacs_domain_sizes():
    sizes = {d: len(pacs_domain(d, size=32)[1]) for d in PACS_DOMAINS}
    assert sizes == {"photo": 1670, "art_painting": 2048, "cartoon": 2344, "sketch": 3929}


@pytest.mark.skipif(not HAS_CIFAR, reason="CIFAR-10 not in ../shared/data")
def test_cifar10_arrays_are_the_official_images_and_labels():
    arrays, source = cifar10_arrays(None)
    (tr_x, tr_y), (te_x, te_y) = arrays["train"], arrays["test"]
    assert tr_x.shape == (50000, 3, 32, 32) and te_x.shape == (10000, 3, 32, 32) and tr_x.dtype == np.uint8
    np.testing.assert_array_equal(te_y, np.load(SHARED / "cifar10" / "test_labels.npy"))  # official order
    assert np.all(np.diff(tr_y) >= 0) and np.bincount(tr_y).tolist() == [5000] * len(CIFAR10_CLASSES)
    assert isinstance(tr_x, np.memmap)  # decoded once, then memory-mapped from the cache
    assert "CIFAR-10" in source


def test_resolve_pacs_domain_accepts_the_alias_and_lists_valid_targets():
    assert resolve_pacs_domain("Art") == "art_painting" and resolve_pacs_domain("sketch") == "sketch"
    with pytest.raises(ValueError, match="photo.*art_painting.*cartoon.*sketch"):
        resolve_pacs_domain("clipart")


def _fake_cifar_zip(root, color: int, n: int = 2):
    """A CIFAR-10 JPEG zip of the project's layout with ``n`` images per class and split, one colour."""
    import io
    import zipfile

    from PIL import Image

    (root / "cifar10").mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    Image.new("RGB", (32, 32), (color, color, color)).save(buf, format="JPEG", quality=100)
    with zipfile.ZipFile(root / "cifar10" / "cifar10-jpeg.zip", "w") as zf:
        for c, cls in enumerate(CIFAR10_CLASSES):
            for i in range(n):
                zf.writestr(f"train/{cls}/{c * n + i:04d}.jpg", buf.getvalue())
                zf.writestr(f"test/{cls}/{c * n + i}.jpg", buf.getvalue())
    np.save(root / "cifar10" / "test_labels.npy", np.repeat(np.arange(10), n))


def test_a_replaced_cifar_zip_is_decoded_again(tmp_path, monkeypatch):
    """The decoded cache is keyed by the zip's size and mtime: new images are never served old pixels."""
    import os

    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "cache"))
    _fake_cifar_zip(tmp_path / "data", color=40)
    first, _ = cifar10_arrays(tmp_path / "data")
    assert abs(int(first["test"][0][0, 0, 0, 0]) - 40) <= 2
    _fake_cifar_zip(tmp_path / "data", color=200)
    zpath = tmp_path / "data" / "cifar10" / "cifar10-jpeg.zip"
    os.utime(zpath, ns=(zpath.stat().st_atime_ns, zpath.stat().st_mtime_ns + 10**9))
    with pytest.warns(UserWarning, match="cifar10-jpeg.zip: changed since its images were decoded"):
        second, _ = cifar10_arrays(tmp_path / "data")
    assert abs(int(second["test"][0][0, 0, 0, 0]) - 200) <= 2
    assert len(list((tmp_path / "cache" / "data" / "decoded").glob("cifar10jpeg*.npy"))) == 4  # old ones gone


def test_a_truncated_decoded_cache_warns_once_and_is_decoded_again(tmp_path, monkeypatch):
    from lib.data import image_files

    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "cache"))
    calls = []

    def build():
        calls.append(1)
        return np.arange(2 * 3 * 4 * 4, dtype=np.uint8).reshape(2, 3, 4, 4), np.array([0, 1])

    x = np.array(image_files._cached_arrays("probe", build)[0])
    path = image_files.decoded_cache_dir() / "probe_x.npy"
    path.write_bytes(path.read_bytes()[:150])  # header intact, data cut: "mmap length is greater..."
    with pytest.warns(UserWarning, match="probe_x.npy.*damaged"):
        again, _ = image_files._cached_arrays("probe", build)
    np.testing.assert_array_equal(again, x)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        image_files._cached_arrays("probe", build)
    assert calls == [1, 1]
