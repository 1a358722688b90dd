"""Tests of lib.augment, lib.data.images and lib.data.synthetic (images)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lib.augment import BatchIterator, crop_at, default_padding, random_crop, random_flip, to_float
from lib.data.images import PACS_DOMAIN_SIZES, load_cifar10h, load_pacs, natural_test_subset, pacs_domain
from lib.data.locate import DataNotFoundError, shared_data_dir
from lib.data.synthetic import synthetic_images, synthetic_pacs_domains

SHARED = shared_data_dir()
HAS_CIFAR = (SHARED / "cifar10" / "cifar10-jpeg.zip").exists() and (SHARED / "cifar10h" / "cifar10h-probs.npy").exists()
HAS_PACS = (SHARED / "pacs" / "photo").is_dir()


# ---------------------------------------------------------------- augmentation


def _batch(b=5, c=3, h=6, w=7, seed=0):
    return torch.randint(0, 256, (b, c, h, w), generator=torch.Generator().manual_seed(seed), dtype=torch.uint8)


def test_default_padding_matches_paper():
    assert default_padding(32) == 4 and default_padding(224) == 28


def test_crop_keeps_shape_and_is_a_shifted_zero_padded_window():
    x = _batch()
    p = 2
    out = random_crop(x, p, torch.Generator().manual_seed(1))
    assert out.shape == x.shape and out.dtype == x.dtype
    # brute force: each output image equals the padded image's window at some offset in [0, 2p]^2
    padded = np.zeros((5, 3, 6 + 2 * p, 7 + 2 * p), np.uint8)
    padded[:, :, p:-p, p:-p] = x.numpy()
    for i in range(5):
        hits = [(dy, dx) for dy in range(2 * p + 1) for dx in range(2 * p + 1)
                if np.array_equal(out[i].numpy(), padded[i, :, dy:dy + 6, dx:dx + 7])]
        assert hits, f"image {i} is not a window of its padded copy"
    # the centre offset is the identity; offset (0, 0) shifts down-right and fills zeros
    centre = crop_at(x, p, torch.full((5,), p), torch.full((5,), p))
    assert torch.equal(centre, x)
    corner = crop_at(x, p, torch.zeros(5, dtype=torch.long), torch.zeros(5, dtype=torch.long))
    assert torch.equal(corner[:, :, p:, p:], x[:, :, :-p, :-p]) and corner[:, :, :p].sum() == 0


def test_flip_is_exact():
    x = _batch(b=64)
    assert torch.equal(random_flip(x, p=1.0), x.flip(-1))
    assert torch.equal(random_flip(x, p=0.0), x)
    out = random_flip(x, torch.Generator().manual_seed(0))
    flipped = [torch.equal(o, xi.flip(-1)) for o, xi in zip(out, x)]
    kept = [torch.equal(o, xi) for o, xi in zip(out, x)]
    assert all(f or k for f, k in zip(flipped, kept))
    assert 16 <= sum(flipped) <= 48  # Binomial(64, 1/2): outside this range has probability < 1e-4


def test_to_float_normalizes():
    x = torch.tensor([0, 255], dtype=torch.uint8).view(1, 1, 1, 2).expand(1, 3, 1, 2)
    out = to_float(x, (0.5, 0.5, 0.5), (0.5, 0.25, 0.5))
    assert torch.allclose(out[0, 1, 0], torch.tensor([-2.0, 2.0]))
    assert torch.allclose(out[0, 0, 0], torch.tensor([-1.0, 1.0]))
    with pytest.raises(ValueError, match="std"):
        to_float(x, (0.5,) * 3, (0.0, 1.0, 1.0))


def test_channels_last_changes_layout_not_values():
    """The CUDA path's channels_last batches hold the same numbers in NHWC memory order."""
    x = torch.randint(0, 256, (4, 3, 5, 6), dtype=torch.uint8)
    plain = to_float(x, (0.4, 0.5, 0.6), (0.2, 0.25, 0.3))
    nhwc = to_float(x, (0.4, 0.5, 0.6), (0.2, 0.25, 0.3), channels_last=True)
    assert nhwc.is_contiguous(memory_format=torch.channels_last) and not plain.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(nhwc, plain)
    assert nhwc.stride()[1] == 1  # channels are the innermost dimension


def test_batch_iterator_is_a_seeded_permutation_per_epoch():
    x, y = torch.arange(10).view(10, 1), torch.arange(10)
    it = BatchIterator(x, y, batch_size=4, seed=3)
    assert len(it) == 3
    it.set_epoch(0)
    first = torch.cat([yb for _, yb in it])
    assert sorted(first.tolist()) == list(range(10))
    it.set_epoch(0)
    assert torch.equal(torch.cat([yb for _, yb in it]), first)
    it.set_epoch(1)
    assert not torch.equal(torch.cat([yb for _, yb in it]), first)
    for xb, yb in it:
        assert torch.equal(xb[:, 0], yb)  # inputs and labels stay paired
    with pytest.raises(ValueError, match="batch_size"):
        BatchIterator(x, y, batch_size=0)


# ---------------------------------------------------------------- synthetic data


def test_synthetic_images_hard_subset_is_the_ambiguous_blends():
    b = synthetic_images(n_train=64, n_val=16, n_test=200, size=8, num_classes=4, seed=0, hard_frac=0.3)
    assert b.train_x.dtype == torch.uint8 and b.train_x.shape == (64, 3, 8, 8)
    assert torch.allclose(b.human_probs.sum(1), torch.ones(200))
    assert torch.equal(b.hard_mask, b.human_probs.max(1).values < 0.7)
    assert 30 <= int(b.hard_mask.sum()) <= 90  # Binomial(200, 0.3)
    assert "SYNTHETIC" in b.source


def test_synthetic_pacs_domains_split():
    b = synthetic_pacs_domains("art", n_per_domain=50, size=8)
    assert b.sizes() == {"train": 135, "val": 15, "test": 50, "hard": 50}
    s = synthetic_pacs_domains("sketch", n_per_domain=10, size=8)
    assert torch.equal(s.test_x[:, 0], s.test_x[:, 1]) and torch.equal(s.test_x[:, 1], s.test_x[:, 2])


# ---------------------------------------------------------------- real data


@pytest.mark.skipif(not HAS_CIFAR, reason="CIFAR-10 / CIFAR-10H not in ../shared/data")
def test_cifar10h_counts_and_hard_subset():
    b = load_cifar10h(n_train=900, n_test=1000, seed=0)
    sizes = b.sizes()
    # every hard image kept; "all" is the uniform sample of 1,000
    assert sizes["hard"] == 327 and sizes["all"] == 1000 and sizes["test"] == 1000 + 327 - int((b.hard_mask & b.all_mask).sum())
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
    shares = [hard[i][m].mean() for i, m in (natural_test_subset(hard, 2000, np.random.default_rng(s)) for s in range(200))]
    assert np.mean(shares) == pytest.approx(0.0327, abs=0.002)
    with pytest.raises(ValueError, match="n_test"):
        natural_test_subset(hard, 0, np.random.default_rng(0))


@pytest.mark.skipif(not HAS_PACS, reason="PACS not in ../shared/data")
def test_pacs_domain_sizes_and_split():
    sizes = {d: len(pacs_domain(d, size=32)[1]) for d in PACS_DOMAIN_SIZES}
    assert sizes == {"photo": 1670, "art_painting": 2048, "cartoon": 2344, "sketch": 3929}
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
