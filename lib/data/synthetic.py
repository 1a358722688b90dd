"""Small data the project makes itself, for the ``smoke`` scale (CI: seconds, no download).

Stand-ins with the same bundle types as the real loaders, so every notebook and the training
engine run end to end without real data. They are clearly synthetic (``source`` says so): images of
a colour and a stripe texture per class plus noise (hard images blend two classes, like CIFAR-10H's
hard subset), four colour-transformed PACS-like domains, and template comments with identity masks.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from lib.data.image_files import PACS_CLASSES, PACS_DOMAINS, resolve_pacs_domain
from lib.data.images import HARD_THRESHOLD, ImageBundle, source_split
from lib.data.text import IDENTITY_GROUPS, TextBundle
from lib.validation import check_int, check_open_unit

__all__ = ["synthetic_images", "synthetic_pacs_domains", "synthetic_comments"]


def _prototypes(num_classes: int, size: int) -> np.ndarray:
    """One float prototype image (C=3, size, size) in [0, 1] per class: colour + stripes."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64) / size
    protos = np.empty((num_classes, 3, size, size))
    for c in range(num_classes):
        hue = c / num_classes
        colour = 0.5 + 0.4 * np.cos(2 * math.pi * (hue + np.array([0.0, 1 / 3, 2 / 3])))
        angle = math.pi * c / num_classes
        freq = 2 + (c % 3)
        stripes = 0.5 + 0.5 * np.sin(2 * math.pi * freq * (np.cos(angle) * xx + np.sin(angle) * yy))
        protos[c] = 0.55 * colour[:, None, None] + 0.45 * stripes[None] * colour[::-1, None, None]
    return np.clip(protos, 0, 1)


def _render(
    protos: np.ndarray, n: int, hard_frac: float, noise: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n images: easy ones = one prototype; hard ones = blend a*p_c + (1-a)*p_c' with a in [0.4, 0.6].

    Returns uint8 images, labels and human_probs (easy: 0.95 on the class; hard: (a, 1-a) on the
    two blended classes, so max < 0.7). The label of a hard image is drawn from its human_probs.
    """
    num_classes = protos.shape[0]
    y = rng.integers(0, num_classes, n)
    probs = np.full((n, num_classes), 0.05 / (num_classes - 1))
    probs[np.arange(n), y] = 0.95
    imgs = protos[y].copy()
    hard = rng.random(n) < hard_frac
    for i in np.flatnonzero(hard):
        a, b = rng.choice(num_classes, 2, replace=False)
        w = rng.uniform(0.4, 0.6)
        imgs[i] = w * protos[a] + (1 - w) * protos[b]
        probs[i] = 0.0
        probs[i, a], probs[i, b] = w, 1 - w
        y[i] = a if rng.random() < w else b
    # a random brightness and shift per image, then pixel noise
    imgs = imgs * rng.uniform(0.8, 1.2, (n, 1, 1, 1)) + noise * rng.standard_normal(imgs.shape)
    shift = rng.integers(-2, 3, (n, 2))
    for i in range(n):
        imgs[i] = np.roll(imgs[i], tuple(shift[i]), axis=(1, 2))
    x = np.clip(imgs * 255, 0, 255).round().astype(np.uint8)
    return x, y.astype(np.int64), probs


def synthetic_images(
    n_train: int = 512,
    n_val: int = 128,
    n_test: int = 256,
    size: int = 16,
    num_classes: int = 4,
    seed: int = 0,
    hard_frac: float = 0.15,
    noise: float = 0.08,
) -> ImageBundle:
    """Synthetic CIFAR-10H stand-in (smoke scale): class patterns plus noise; the blended images are the
    hard ones (max human probability < 0.7, the CIFAR-10H rule)."""
    check_int(n_train, "n_train")
    check_int(n_val, "n_val")
    check_int(n_test, "n_test")
    check_int(size, "size", 4)
    check_int(num_classes, "num_classes", 2)
    check_open_unit(hard_frac, "hard_frac")
    rng = np.random.default_rng(seed)
    protos = _prototypes(num_classes, size)
    parts = [_render(protos, n, hard_frac, noise, rng) for n in (n_train, n_val, n_test)]
    t, human = torch.from_numpy, parts[2][2]  # the test images' human probabilities
    return ImageBundle.from_pairs(
        "synthetic-images",
        *[(t(x), t(y)) for x, y, _ in parts],  # train, validation, test
        hard_mask=t(human.max(axis=1) < HARD_THRESHOLD),
        human_probs=t(human).float(),
        classes=tuple(f"class{c}" for c in range(num_classes)),
        source=f"SYNTHETIC images made by lib.data.synthetic (seed {seed}); not real data",
    )


def _domain_transform(x: np.ndarray, domain: str) -> np.ndarray:
    """Colour transform of a float (N, 3, H, W) batch in [0, 1] that defines a synthetic domain: photo =
    identity, art_painting = channel permutation and saturation, cartoon = posterized high contrast,
    sketch = inverted grayscale."""
    if domain == "photo":
        return x
    if domain == "art_painting":
        gray = x.mean(axis=1, keepdims=True)
        return np.clip(gray + 1.6 * (x[:, [2, 0, 1]] - gray), 0, 1)
    if domain == "cartoon":
        return np.round(np.clip((x - 0.5) * 1.8 + 0.5, 0, 1) * 3) / 3
    gray = x.mean(axis=1, keepdims=True)  # sketch: inverted grayscale, replicated to RGB
    return np.repeat(1 - gray, 3, axis=1)


def synthetic_pacs_domains(
    target: str = "sketch", n_per_domain: int = 160, size: int = 16, seed: int = 0
) -> ImageBundle:
    """Synthetic PACS stand-in (smoke scale): four colour-transformed domains of one class structure
    (the seven PACS classes), split as :func:`lib.data.images.load_pacs` splits PACS."""
    target = resolve_pacs_domain(target)
    check_int(n_per_domain, "n_per_domain", 2)
    check_int(size, "size", 4)
    rng = np.random.default_rng(seed)
    protos = _prototypes(len(PACS_CLASSES), size)
    per: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for d in PACS_DOMAINS:
        x, y, _ = _render(protos, n_per_domain, 0.1, 0.08, rng)
        xf = _domain_transform(x.astype(np.float64) / 255, d)
        per[d] = (np.clip(xf * 255, 0, 255).round().astype(np.uint8), y)
    src_x = np.concatenate([per[d][0] for d in PACS_DOMAINS if d != target])
    src_y = np.concatenate([per[d][1] for d in PACS_DOMAINS if d != target])
    vi, ti = source_split(rng.permutation(len(src_y)))
    tx, ty = per[target]
    t = torch.from_numpy
    return ImageBundle.from_pairs(
        f"synthetic-pacs-{target}",
        (t(src_x[ti]), t(src_y[ti])),
        (t(src_x[vi]), t(src_y[vi])),
        (t(tx), t(ty)),
        hard_mask=torch.ones(len(ty), dtype=torch.bool),
        classes=PACS_CLASSES,
        source=f"SYNTHETIC PACS-like domains made by lib.data.synthetic (seed {seed}); not real data",
    )


_GROUP_WORDS: dict[str, list[str]] = {
    "male": ["men", "my brother", "the guys"],
    "female": ["women", "my sister", "the ladies"],
    "LGBTQ": ["gay people", "the trans community", "lesbians"],
    "christian": ["christians", "the church", "catholics"],
    "muslim": ["muslims", "the mosque", "islamic people"],
    "other_religions": ["jews", "hindus", "buddhists"],
    "black": ["black people", "the black community", "african americans"],
    "white": ["white people", "the white community", "caucasians"],
}
_NEUTRAL = ["the city council", "the new stadium", "this article", "the weather", "the budget", "my neighbours"]
_TOXIC = [
    "{s} are idiots and should shut up",
    "I hate {s}, they are disgusting",
    "{s} are stupid trash",
    "only a moron would defend {s}",
    "{s} are pathetic losers",
]
_CLEAN = [
    "I had a nice conversation about {s}",
    "{s} made a fair point today",
    "thanks for writing about {s}",
    "I agree with what {s} said",
    "{s} deserve a good discussion",
]


def synthetic_comments(n: int = 400, seed: int = 0) -> TextBundle:
    """Synthetic CivilComments stand-in (smoke scale): toxic or clean template sentences (5% of labels
    flipped), 40% of them naming an identity group (the masks; hard = any), split 60/20/20."""
    check_int(n, "n", 10)
    rng = np.random.default_rng(seed)
    texts: list[str] = []
    labels = np.empty(n, dtype=np.int64)
    groups = {g: np.zeros(n, dtype=bool) for g in IDENTITY_GROUPS}
    for i in range(n):
        if rng.random() < 0.4:
            g = IDENTITY_GROUPS[rng.integers(len(IDENTITY_GROUPS))]
            subject = _GROUP_WORDS[g][rng.integers(3)]
            groups[g][i] = True
        else:
            subject = _NEUTRAL[rng.integers(len(_NEUTRAL))]
        toxic = rng.random() < 0.3
        template = (_TOXIC if toxic else _CLEAN)[rng.integers(5)]
        texts.append(template.format(s=subject))
        labels[i] = int(toxic) ^ int(rng.random() < 0.05)
    n_tr, n_va = int(0.6 * n), int(0.2 * n)
    sl = {"train": slice(0, n_tr), "val": slice(n_tr, n_tr + n_va), "test": slice(n_tr + n_va, n)}
    test_groups = {g: torch.from_numpy(m[sl["test"]].copy()) for g, m in groups.items()}
    hard = torch.stack(list(test_groups.values())).any(0)  # mentions any group
    t = torch.from_numpy
    return TextBundle(
        name="synthetic-comments",
        train_texts=texts[sl["train"]],
        train_y=t(labels[sl["train"]].copy()),
        val_texts=texts[sl["val"]],
        val_y=t(labels[sl["val"]].copy()),
        test_texts=texts[sl["test"]],
        test_y=t(labels[sl["test"]].copy()),
        test_groups=test_groups,
        hard_mask=hard,
        source=f"SYNTHETIC template comments made by lib.data.synthetic (seed {seed}); not real data",
    )
