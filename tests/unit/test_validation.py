"""lib.validation: every check names the argument and the problem."""

import numpy as np
import pytest
import torch

from lib import validation as v


def test_probs_must_sum_to_one_and_message_says_so() -> None:
    with pytest.raises(ValueError, match=r"probs: rows must sum to 1.*pass probabilities, not logits"):
        v.check_probs(np.array([[0.5, 0.6]]))
    v.check_probs(np.array([[0.5, 0.5 + 5e-5]]))  # within the 1e-4 tolerance
    v.check_probs(torch.tensor([[0.25, 0.75]]))


@pytest.mark.parametrize(
    ("value", "pattern"),
    [
        (np.array([0.2, 0.8]), "expected 2-D"),
        (np.array([[np.nan, 1.0]]), "NaN"),
        (np.array([[-0.5, 1.5]]), "negative"),
    ],
)
def test_probs_shape_nan_negative(value, pattern) -> None:
    with pytest.raises(ValueError, match=f"probs: .*{pattern}"):
        v.check_probs(value)


def test_labels_out_of_range_and_non_integer() -> None:
    with pytest.raises(ValueError, match=r"labels: labels must lie in \[0, 3\), got range \[0, 3\]"):
        v.check_labels(np.array([0, 3]), 3)
    with pytest.raises(ValueError, match="labels: labels must be integers"):
        v.check_labels(np.array([0.5]), 3)
    with pytest.raises(ValueError, match="labels: labels must lie"):
        v.check_labels(torch.tensor([-1]), 3)


def test_lengths_and_ranges() -> None:
    with pytest.raises(ValueError, match=r"probs and labels: lengths differ \(1 vs 2\)"):
        v.check_probs_labels(np.array([[1.0, 0.0]]), np.array([0, 1]))
    with pytest.raises(ValueError, match="lam: must be >= 0"):
        v.check_positive(-1.0, "lam", allow_zero=True)
    with pytest.raises(ValueError, match=r"coverage: must lie in the open interval \(0, 1\)"):
        v.check_open_unit(1.0, "coverage")
    with pytest.raises(ValueError, match=r"conf: values must lie in \[0, 1\]"):
        v.check_unit_interval(np.array([0.2, 1.2]), "conf")


def test_choice_lists_valid_values() -> None:
    with pytest.raises(ValueError, match="binning: unknown value 'x'; valid values are 'width', 'mass'"):
        v.check_choice("x", ("width", "mass"), "binning")
