"""Tests of lib.data.text (CivilComments loader, tokenization) and synthetic comments."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from lib.data.locate import DataNotFoundError
from lib.data.synthetic import _GROUP_WORDS, synthetic_comments
from lib.data.text import IDENTITY_GROUPS, load_civilcomments, tokenize


def _fake_wilds(root, n_train=40, n_test=12):
    """A tiny csv in the WILDS civilcomments_v1.0 layout (all_data_with_identities.csv)."""
    rows = []
    for i in range(n_train + n_test):
        row = {
            "comment_text": f"comment {i}",
            "toxicity": (i % 4) / 4 + 0.01,
            "split": "train" if i < n_train else "test",
        }
        for j, g in enumerate(IDENTITY_GROUPS):
            row[g] = 1.0 if (i % 9) == j else 0.0
        rows.append(row)
    folder = root / "civilcomments_v1.0"
    folder.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(folder / "all_data_with_identities.csv")
    return pd.DataFrame(rows)


def test_load_civilcomments_from_a_wilds_folder(tmp_path):
    df = _fake_wilds(tmp_path)
    b = load_civilcomments(data_dir=tmp_path, n_train=20, seed=0)
    assert b.sizes()["train"] == 18 and b.sizes()["val"] == 2 and b.sizes()["test"] == 12
    test = df[df["split"] == "test"]
    assert b.test_texts == test["comment_text"].tolist()
    assert b.test_y.tolist() == (test["toxicity"] >= 0.5).astype(int).tolist()
    for g in IDENTITY_GROUPS:
        assert b.test_groups[g].tolist() == (test[g] >= 0.5).tolist()
    any_group = (test[list(IDENTITY_GROUPS)] >= 0.5).any(axis=1)
    assert b.hard_mask.tolist() == any_group.tolist()
    # the subsample is seeded: same seed, same comments; train and validation are disjoint
    again = load_civilcomments(data_dir=tmp_path, n_train=20, seed=0)
    assert again.train_texts == b.train_texts
    assert not set(b.train_texts) & set(b.val_texts)


def test_civilcomments_missing_offline_names_places(no_data):
    empty = no_data
    with pytest.raises(DataNotFoundError) as err:
        load_civilcomments()
    msg = str(err.value)
    assert "civilcomments" in msg and str(empty) in msg and "wilds" in msg.lower()
    with pytest.raises(ValueError, match="n_train"):
        load_civilcomments(n_train=0)


def test_synthetic_comments_groups_and_hard_mask():
    b = synthetic_comments(n=300, seed=0)
    assert b.sizes()["train"] == 180 and b.sizes()["val"] == 60 and b.sizes()["test"] == 60
    hard = torch.zeros(60, dtype=torch.bool)
    for g, m in b.test_groups.items():
        hard |= m
        for text, flag in zip(b.test_texts, m.tolist()):
            if flag:  # a comment marked with a group mentions one of that group's phrases
                assert any(w in text for w in _GROUP_WORDS[g])
    assert torch.equal(hard, b.hard_mask)
    assert set(b.train_y.tolist()) == {0, 1} and "SYNTHETIC" in b.source


def test_tokenize_pads_and_truncates():
    class Tok:  # a minimal stand-in with the HF tokenizer call signature
        def __call__(self, texts, padding, truncation, max_length, return_tensors):
            ids = [[1] + [5] * min(len(t.split()), max_length - 1) for t in texts]
            L = max(map(len, ids))
            return {
                "input_ids": torch.tensor([i + [0] * (L - len(i)) for i in ids]),
                "attention_mask": torch.tensor([[1] * len(i) + [0] * (L - len(i)) for i in ids]),
            }

    enc = tokenize(["a b c", "a"], Tok(), max_length=8)
    assert enc["input_ids"].shape == (2, 4) and enc["attention_mask"].sum().item() == 6
    with pytest.raises(ValueError, match="texts"):
        tokenize("not a list", Tok())
    with pytest.raises(ValueError, match="texts"):
        tokenize(["a", 3], Tok())
    with pytest.raises(ValueError, match="max_length"):
        tokenize(["a"], Tok(), max_length=2.5)
