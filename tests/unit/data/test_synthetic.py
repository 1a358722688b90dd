"""Tests of lib.data.synthetic (images): the stand-ins for CIFAR-10H and PACS at smoke scale."""

from __future__ import annotations

import torch

from lib.data.synthetic import synthetic_images, synthetic_pacs_domains


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
