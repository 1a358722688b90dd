"""lib.moe.experiment: the config grid of a scale and top-label predictions."""

from __future__ import annotations

import numpy as np
import pytest

from lib.moe import experiment as exp


def test_train_configs_grid() -> None:
    settings = {
        "methods": ["vanilla", "robust"],
        "seeds": [0, 1, 2],
        "epochs": 3,
        "lr": 0.01,
        "backbone": "tiny_cnn",
        "width": 8,
        "n_train": 100,
        "data": "synthetic",
    }
    cfgs = exp.train_configs(settings, lam=4.0)
    assert len(cfgs) == 6
    assert {(c.method, c.seed) for c in cfgs} == {(m, s) for m in ("vanilla", "robust") for s in (0, 1, 2)}
    assert all(c.epochs == 3 and c.lr == 0.01 and c.lam == 4.0 and c.backbone == "tiny_cnn" for c in cfgs)
    robust = [c for c in cfgs if c.method == "robust"][0]
    assert robust.warmup == 1  # 40% of 3 epochs, rounded
    with pytest.raises(ValueError, match="methods"):
        exp.train_configs(settings, methods=["bagging"])


def test_top_label() -> None:
    conf, correct = exp.top_label(np.array([[0.2, 0.8], [0.6, 0.4]]), np.array([1, 1]))
    assert np.allclose(conf, [0.8, 0.6]) and list(correct) == [1, 0]
