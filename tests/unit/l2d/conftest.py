"""Shared fixtures of paper 2's unit tests."""

import pytest


@pytest.fixture
def tiny_gaussians() -> dict:
    """Settings of a mixture-of-Gaussians run small enough for a unit test
    (:func:`lib.l2d.experiment.run_gaussian`'s ``cfg``)."""
    return {
        "n_train": 80,
        "n_val": 40,
        "n_test": 60,
        "hidden": [8],
        "epochs": 2,
        "lr": 0.05,
        "batch_size": 32,
        "patience": 2,
        "weight_decay": 0.0,
    }
