"""CivilComments (WILDS) for the text experiment of the MoE paper, and tokenization.

Paper: "Calibrated mixture-of-experts under distribution shift" (paper 1),
Table 4 / Appendix D: 50,000 training comments subsampled with a fixed seed, the last 10% of them for
validation, the full WILDS test split; label = toxicity >= 0.5; the eight identity groups
(annotation >= 0.5); hard = mentions any. The ``smoke`` scale uses
:func:`lib.data.synthetic.synthetic_comments`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lib.data.bundle import Splits
from lib.data.locate import describe, locate, reading
from lib.validation import check_int

IDENTITY_GROUPS: tuple[str, ...] = tuple("male female LGBTQ christian muslim other_religions black white".split())
TOXIC_THRESHOLD = 0.5
WILDS_FOLDER = "civilcomments_v1.0"
WILDS_CSV = "all_data_with_identities.csv"

__all__ = ["IDENTITY_GROUPS", "TextBundle", "load_civilcomments", "tokenize"]


@dataclass
class TextBundle(Splits):
    """Texts and int64 labels (1 = toxic); ``test_groups``: each identity group's mask over the test
    comments, ``hard_mask`` = mentions any."""

    name: str
    train_texts: list[str]
    train_y: torch.Tensor
    val_texts: list[str]
    val_y: torch.Tensor
    test_texts: list[str]
    test_y: torch.Tensor
    test_groups: dict[str, torch.Tensor]
    hard_mask: torch.Tensor
    source: str
    classes: tuple[str, ...] = ("non-toxic", "toxic")
    kind: str = "text"

    def fingerprint(self) -> str:
        """A short hash of name, sizes, labels and a sample of texts (part of run cache keys)."""
        texts = (self.train_texts, self.test_texts)
        return self.digest(
            f"{self.name}|{self.sizes()}", ("\x00".join(t[:: max(1, len(t) // 64)]).encode() for t in texts)
        )


_HOW = (
    "CivilComments (WILDS v1.0) is not bundled. Either install the `wilds` package and run "
    "`wilds.get_dataset('civilcomments', download=True, root_dir=<dir>)`, or download "
    "civilcomments_v1.0 from https://wilds.stanford.edu/datasets/ and put the folder "
    f"{WILDS_FOLDER}/ (holding {WILDS_CSV}) under $CALIBOOK_DATA or ../shared/data. "
    "Use the smoke scale (lib.data.synthetic.synthetic_comments) to run without it."
)


def _download_wilds(cache: Path) -> Path:
    """Download through the WILDS package (its official source, with checksums), when installed."""
    import wilds  # type: ignore[import-not-found]  # optional: only used when online

    wilds.get_dataset(dataset="civilcomments", download=True, root_dir=str(cache))
    return cache / WILDS_FOLDER / WILDS_CSV


def load_civilcomments(
    data_dir: str | os.PathLike[str] | None = None, n_train: int = 50000, seed: int = 0
) -> TextBundle:
    """CivilComments (WILDS) as in the MoE paper: 50,000 subsampled training comments, the last 10% of
    them for validation, the full test split, eight identity-group masks and the hard subset.

    Raises :class:`~lib.data.locate.DataNotFoundError` (naming every place tried) when the WILDS
    folder is absent and the download is impossible (offline, or ``wilds`` not installed).
    """
    check_int(n_train, "n_train", 10)
    path = locate("civilcomments", f"{WILDS_FOLDER}/{WILDS_CSV}", data_dir, _download_wilds, _HOW)
    if path.is_dir():  # an explicit civilcomments_v1.0 folder
        path = path / WILDS_CSV
    import pandas as pd  # pandas reads the 450k-row WILDS csv with its quoting correctly

    with reading(path, _HOW):
        df = pd.read_csv(path, index_col=0)
    missing = [c for c in ("comment_text", "toxicity", "split", *IDENTITY_GROUPS) if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: columns {missing} are missing (expected the WILDS civilcomments csv)")
    df["comment_text"] = df["comment_text"].fillna("").astype(str)
    train_all = df[df["split"] == "train"]
    n = min(n_train, len(train_all))
    pick = np.random.default_rng(seed).choice(len(train_all), n, replace=False)
    sub = train_all.iloc[pick]
    n_val = n // 10
    tr, va = sub.iloc[: n - n_val], sub.iloc[n - n_val :]
    te = df[df["split"] == "test"]

    def labels(frame: Any) -> torch.Tensor:
        return torch.from_numpy((frame["toxicity"].to_numpy() >= TOXIC_THRESHOLD).astype(np.int64))

    groups = {g: torch.from_numpy(te[g].fillna(0).to_numpy() >= 0.5) for g in IDENTITY_GROUPS}
    hard = torch.stack(list(groups.values())).any(0)  # mentions any group
    return TextBundle(
        name="civilcomments",
        train_texts=tr["comment_text"].tolist(),
        train_y=labels(tr),
        val_texts=va["comment_text"].tolist(),
        val_y=labels(va),
        test_texts=te["comment_text"].tolist(),
        test_y=labels(te),
        test_groups=groups,
        hard_mask=hard,
        source=f"WILDS CivilComments v1.0 ({describe(path)})",
    )


def tokenize(texts: list[str], tokenizer: Any, max_length: int = 128) -> dict[str, torch.Tensor]:
    """``input_ids``/``attention_mask`` of ``texts`` by a Hugging Face ``tokenizer``, padded to the longest
    (at most ``max_length`` tokens)."""
    if not isinstance(texts, (list, tuple)) or not all(isinstance(t, str) for t in texts):
        raise ValueError("texts: expected a list of strings")
    check_int(max_length, "max_length", 2)
    enc = tokenizer(list(texts), padding="longest", truncation=True, max_length=max_length, return_tensors="pt")
    return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}
