"""Tests of lib.data.augment: crops, flips, normalization, memory layout and the seeded batch iterator."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lib.data.augment import Augment, BatchIterator, crop_at, default_padding, to_float


def _batch(b=5, c=3, h=6, w=7, seed=0):
    return torch.randint(0, 256, (b, c, h, w), generator=torch.Generator().manual_seed(seed), dtype=torch.uint8)


def test_default_padding_matches_paper():
    assert default_padding(32) == 4 and default_padding(224) == 28


def test_crop_keeps_shape_and_is_a_shifted_zero_padded_window():
    x = _batch()
    p = 2
    dy, dx = torch.randint(0, 2 * p + 1, (2, 5), generator=torch.Generator().manual_seed(1))
    out = crop_at(x, p, dy, dx)
    assert out.shape == x.shape and out.dtype == x.dtype
    # by hand: each output image is the padded image's window at its offset
    padded = np.zeros((5, 3, 6 + 2 * p, 7 + 2 * p), np.uint8)
    padded[:, :, p:-p, p:-p] = x.numpy()
    for i, (r, c) in enumerate(zip(dy.tolist(), dx.tolist())):
        assert np.array_equal(out[i].numpy(), padded[i, :, r : r + 6, c : c + 7]), f"image {i}"
    # the centre offset is the identity; offset (0, 0) shifts down-right and fills zeros
    centre = crop_at(x, p, torch.full((5,), p), torch.full((5,), p))
    assert torch.equal(centre, x)
    corner = crop_at(x, p, torch.zeros(5, dtype=torch.long), torch.zeros(5, dtype=torch.long))
    assert torch.equal(corner[:, :, p:, p:], x[:, :, :-p, :-p]) and corner[:, :, :p].sum() == 0


def test_flip_is_exact():
    """Without a crop (padding 0) each image comes out normalized as it is or exactly mirrored."""
    x = _batch(b=64)
    stats = ((0.5, 0.4, 0.3), (0.2, 0.25, 0.3))
    out = Augment(*stats, padding=0)(x, torch.Generator().manual_seed(0))
    x = to_float(x, *stats)
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
    assert nhwc.is_contiguous(memory_format=torch.channels_last) and not plain.is_contiguous(
        memory_format=torch.channels_last
    )
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


@pytest.mark.parametrize(
    "aug",
    [
        Augment((0.5, 0.4, 0.3), (0.2, 0.25, 0.3)),  # padding 1 at 8 px
        Augment((0.5, 0.4, 0.3), (0.2, 0.25, 0.3), padding=3, channels_last=True),
        Augment((0.5, 0.4, 0.3), (0.2, 0.25, 0.3), padding=0),  # flip only: no crop offsets drawn
        Augment((0.5, 0.4, 0.3), (0.2, 0.25, 0.3), crop_flip=False),  # normalization only
    ],
)
def test_augment_many_is_each_run_alone_exactly(aug):
    """A pack's one call gives each run exactly the images of its own call alone (its crop offsets
    and flips from its own generator, in the same order), and leaves each generator where its call
    alone leaves it (the next draw of a run's generator is the same)."""
    xs = [
        torch.randint(0, 256, (5, 3, 8, 8), dtype=torch.uint8, generator=torch.Generator().manual_seed(g))
        for g in range(3)
    ]
    alone_gens = [torch.Generator().manual_seed(10 + g) for g in range(3)]
    pack_gens = [torch.Generator().manual_seed(10 + g) for g in range(3)]
    alone = [aug(x, g) for x, g in zip(xs, alone_gens)]
    packed = aug.many(xs, pack_gens)
    assert len(packed) == 3
    for a, p in zip(alone, packed):
        assert torch.equal(a, p)
        assert p.is_contiguous(memory_format=torch.channels_last) == aug.channels_last
    for a, p in zip(alone_gens, pack_gens):
        assert torch.equal(torch.rand(4, generator=a), torch.rand(4, generator=p))


def test_augment_is_the_papers_recipe_and_names_a_bad_padding():
    """``Augment(...)(x, g)`` is the recipe step by step: crop at the default padding (16 px: 2), then
    flip, from one generator, then normalize; ``crop_flip=False`` only normalizes; a negative padding
    is one line."""
    x = torch.randint(0, 256, (4, 3, 16, 16), dtype=torch.uint8)
    got = Augment((0.5,) * 3, (0.25,) * 3)(x, torch.Generator().manual_seed(1))
    g = torch.Generator().manual_seed(1)
    dy, dx = torch.randint(0, 2 * 2 + 1, (2, 4), generator=g)  # crop offsets in {0, ..., 2 padding}
    flip = torch.rand(4, generator=g) < 0.5
    cropped = crop_at(x, 2, dy, dx)
    want = torch.where(flip[:, None, None, None], cropped.flip(-1), cropped)
    assert torch.equal(got, to_float(want, (0.5,) * 3, (0.25,) * 3))
    plain = Augment((0.5,) * 3, (0.25,) * 3, crop_flip=False)(x, None)
    assert torch.equal(plain, to_float(x, (0.5,) * 3, (0.25,) * 3))
    with pytest.raises(ValueError, match="^padding: must be a non-negative integer, got -1$"):
        Augment((0.5,) * 3, (0.25,) * 3, padding=-1)
