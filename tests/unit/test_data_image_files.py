"""Tests of lib.data.image_files: the raw CIFAR-10 and PACS images, decoded once and cached."""

from __future__ import annotations

import numpy as np
import pytest

from lib.data.image_files import CIFAR10_CLASSES, PACS_DOMAIN_SIZES, cifar10_arrays, pacs_domain, resolve_pacs_domain
from lib.data.locate import shared_data_dir

SHARED = shared_data_dir()
HAS_CIFAR = (SHARED / "cifar10" / "cifar10-jpeg.zip").exists()
HAS_PACS = (SHARED / "pacs" / "photo").is_dir()


@pytest.mark.skipif(not HAS_PACS, reason="PACS not in ../shared/data")
def test_pacs_domain_sizes():
    sizes = {d: len(pacs_domain(d, size=32)[1]) for d in PACS_DOMAIN_SIZES}
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
