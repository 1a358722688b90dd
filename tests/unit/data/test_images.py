"""Tests of lib.data.images: the CIFAR-10H and PACS splits (sizes, hard subsets, the natural-proportion
test sample) and the errors when data is missing."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lib.data.images import load_cifar10h, load_pacs, natural_test_subset
from lib.data.locate import DataNotFoundError, shared_data_dir

SHARED = shared_data_dir()
HAS_CIFAR = (SHARED / "cifar10" / "cifar10-jpeg.zip").exists() and (SHARED / "cifar10h" / "cifar10h-probs.npy").exists()
HAS_PACS = (SHARED / "pacs" / "photo").is_dir()


@pytest.mark.skipif(not HAS_CIFAR, reason="CIFAR-10 / CIFAR-10H not in ../shared/data")
def test_cifar10h_counts_and_hard_subset():
    b = load_cifar10h(n_train=900, n_test=1000, seed=0)
    sizes = b.sizes()
    # every hard image kept; "all" is the uniform sample of 1,000
    assert (
        sizes["hard"] == 327
        and sizes["all"] == 1000
        and sizes["test"] == 1000 + 327 - int((b.hard_mask & b.all_mask).sum())
    )
    assert b.info["hard_fraction_full_test"] == pytest.approx(327 / 10000)
    idx = np.asarray(b.info["test_index"])
    official = np.load(SHARED / "cifar10" / "test_labels.npy")
    human = np.load(SHARED / "cifar10h" / "cifar10h-probs.npy")
    np.testing.assert_array_equal(b.test_y.numpy(), official[idx])
    np.testing.assert_array_equal(b.hard_mask.numpy(), human[idx].max(1) < 0.7)
    assert b.train_x.dtype == torch.uint8 and b.train_x.shape[1:] == (3, 32, 32)
    full = load_cifar10h()
    assert full.sizes() == {"train": 45000, "val": 5000, "test": 10000, "hard": 327}
    np.testing.assert_array_equal(full.test_y.numpy(), official)
    assert full.all_mask is None and "all" not in full.sizes()


def test_natural_test_subset_keeps_the_natural_proportion_and_all_hard():
    hard = np.zeros(10000, dtype=bool)
    hard[np.random.default_rng(1).choice(10000, 327, replace=False)] = True
    idx, all_mask = natural_test_subset(hard, 2000, np.random.default_rng(0))
    assert np.all(np.diff(idx) > 0) and hard[idx].sum() == 327 and all_mask.sum() == 2000
    # the uniform sample's hard count is hypergeometric: mean 2000 * 327/10000 = 65.4,
    # sd = sqrt(2000 p (1-p) (10000-2000)/(10000-1)) = 7.1; 5 sd either side
    k = int(hard[idx][all_mask].sum())
    assert abs(k - 65.4) < 5 * 7.1
    # over many draws the mean share matches 3.27% (the sample is uniform, not stratified)
    shares = [
        hard[i][m].mean() for i, m in (natural_test_subset(hard, 2000, np.random.default_rng(s)) for s in range(200))
    ]
    assert np.mean(shares) == pytest.approx(0.0327, abs=0.002)
    with pytest.raises(ValueError, match="n_test"):
        natural_test_subset(hard, 0, np.random.default_rng(0))


@pytest.mark.skipif(not HAS_PACS, reason="PACS not in ../shared/data")
def test_pacs_split():
    b = load_pacs("art", size=32)
    n_src = 1670 + 2344 + 3929
    assert b.name == "pacs-art_painting"
    assert b.sizes() == {"train": n_src - round(0.1 * n_src), "val": round(0.1 * n_src), "test": 2048, "hard": 2048}
    s = load_pacs("sketch", size=32)
    assert torch.equal(s.test_x[:, 0], s.test_x[:, 2])  # grayscale sketches became R=G=B
    assert s.test_x.shape[1:] == (3, 32, 32)


def test_pacs_unknown_target_lists_valid_ones():
    with pytest.raises(ValueError, match="photo.*art_painting.*cartoon.*sketch"):
        load_pacs("clipart")


def test_missing_data_names_the_places(no_data):
    empty = no_data
    with pytest.raises(DataNotFoundError) as err:
        load_cifar10h()
    msg = str(err.value)
    assert "cifar10" in msg and str(empty) in msg and "no-shared" in msg and "How to get it" in msg
    with pytest.raises(DataNotFoundError, match="pacs"):
        load_pacs("photo", size=32)


def test_pacs_examples_show_each_class_in_each_domain() -> None:
    from lib.data.image_files import PACS_CLASSES, PACS_DOMAINS, pacs_domain
    from lib.data.images import pacs_examples

    try:
        x, captions = pacs_examples(("dog", "house"), size=32)
    except FileNotFoundError:
        pytest.skip("PACS is not available on this machine")
    assert x.shape == (2 * len(PACS_DOMAINS), 3, 32, 32) and x.dtype == torch.uint8
    assert captions[:2] == ["photo: dog", "photo: house"] and captions[-1] == "sketch: house"
    xs, ys, _ = pacs_domain("sketch", 32)
    first_house = int(torch.nonzero(ys == PACS_CLASSES.index("house"))[0])
    assert torch.equal(x[-1], xs[first_house])
    with pytest.raises(ValueError, match="classes"):
        pacs_examples(("unicorn",))
