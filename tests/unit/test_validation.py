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
    [(np.array([0.2, 0.8]), "expected 2-D"), (np.array([[np.nan, 1.0]]), "NaN"), (np.array([[-0.5, 1.5]]), "negative")],
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


@pytest.mark.parametrize("bad", ["0.5", None, True, np.bool_(True), [0.5], float("nan"), float("inf")])
def test_check_number_refuses_non_numbers_naming_the_argument(bad) -> None:
    with pytest.raises(ValueError, match=r"^alpha: must"):
        v.check_number(bad, "alpha", 0.0, 1.0)


def test_check_number_accepts_numpy_and_0d_tensors_and_reports_the_domain() -> None:
    assert v.check_number(np.float32(0.5), "a") == 0.5
    assert v.check_number(torch.tensor(2.0), "a", low=0.0) == 2.0
    assert v.check_number(np.array(3), "a") == 3.0
    with pytest.raises(ValueError, match=r"a: must lie in \[0, 1\], got 2"):
        v.check_number(2, "a", 0.0, 1.0)
    with pytest.raises(ValueError, match=r"a: must be > 0, got 0"):
        v.check_positive(0, "a")
    assert v.check_positive(0, "a", allow_zero=True) == 0.0


def test_bin_counts_are_capped() -> None:
    assert v.check_bins(15) == 15
    with pytest.raises(ValueError, match=f"n_bins: must be an integer <= {v.MAX_BINS}"):
        v.check_bins(10**9)
    with pytest.raises(ValueError, match="n_bins: must be an integer >= 1"):
        v.check_bins(2.0)


def test_bfloat16_tensors_convert_to_numpy() -> None:
    x = torch.tensor([[0.25, 0.75]], dtype=torch.bfloat16)
    assert np.allclose(v.to_numpy(x, "probs"), [[0.25, 0.75]])


def test_half_precision_softmax_passes_and_logits_still_fail() -> None:
    z = torch.randn(500, 10, generator=torch.Generator().manual_seed(0)) * 3
    p16 = torch.softmax(z.half(), dim=1)
    off = (p16.double().sum(1) - 1).abs().max().item()
    assert off > v.PROB_TOL  # the float16 rounding this tolerance is for
    v.check_probs(p16)
    v.check_probs(p16.double(), tol=v.prob_tolerance(p16))
    assert v.prob_tolerance(np.zeros((1, 10))) == v.PROB_TOL
    with pytest.raises(ValueError, match="rows must sum to 1"):
        v.check_probs(torch.softmax(z, 1).half() * 1.05)
    with pytest.raises(ValueError, match="rows must sum to 1"):
        v.check_probs(np.float32(v.PROB_TOL * 3) + torch.softmax(z, 1).numpy())


def test_misspelled_names_get_a_suggestion() -> None:
    with pytest.raises(ValueError, match=r"scale: unknown value 'smok'.*did you mean 'smoke'\?"):
        v.check_choice("smok", ("smoke", "cpu"), "scale")
    with pytest.raises(ValueError, match=r"kw: unknown keyword argument 'covrage'.*did you mean 'coverage'\?"):
        v.check_keywords({"covrage": 0.5}, ["coverage", "nu"])
    v.check_keywords({"nu": 0.1}, ["coverage", "nu"])


def test_to_int_array_refuses_fractions_instead_of_truncating() -> None:
    assert v.to_int_array([1.0, 2.0], "idx").tolist() == [1, 2]
    assert v.to_int_array(torch.tensor([3, 4]), "idx").dtype == np.int64
    for bad in ([1.7], [np.nan], [np.inf]):
        with pytest.raises(ValueError, match="^idx: must hold integers"):
            v.to_int_array(bad, "idx")


def test_check_nonempty_names_the_argument() -> None:
    v.check_nonempty(np.zeros((1, 2)), "logits")
    for empty in (np.zeros((0, 3)), torch.zeros(0), np.float64(1.0)):
        with pytest.raises(ValueError, match="^logits: is empty"):
            v.check_nonempty(empty, "logits")


def test_to_float_tensor_casts_integers_and_checks_shape_and_values() -> None:
    t = v.to_float_tensor([1, 2, 3], "x", 1)
    assert t.dtype == torch.get_default_dtype() and t.tolist() == [1.0, 2.0, 3.0]
    assert v.to_float_tensor(np.array([[1, 0]]), "x", 2, dtype=torch.float64).dtype == torch.float64
    half = torch.tensor([0.5], dtype=torch.float16)
    assert v.to_float_tensor(half, "x", 1) is half  # floats pass through untouched
    with pytest.raises(ValueError, match=r"^z: expected 2-D array \(rows x cols\)"):
        v.to_float_tensor([1.0, 2.0], "z", 2, "rows x cols")
    with pytest.raises(ValueError, match="^z: contains NaN"):
        v.to_float_tensor([1.0, float("nan")], "z", 1)


def test_to_unit_vector_and_to_flags() -> None:
    assert v.to_unit_vector([0, 0.5, 1], "c").tolist() == [0.0, 0.5, 1.0]
    with pytest.raises(ValueError, match=r"^c: values must lie in \[0, 1\]"):
        v.to_unit_vector([0.2, 1.5], "c")
    assert v.to_flags([1, 0, True], "f").tolist() == [True, False, True]
    with pytest.raises(ValueError, match="^f: values must be 0/1 or booleans"):
        v.to_flags([0, 2], "f")
    with pytest.raises(ValueError, match="^f: expected 1-D"):
        v.to_flags([[0, 1]], "f")


def test_error_line_is_the_type_and_the_first_line_of_the_message():
    assert (
        v.error_line(RuntimeError("cuDNN error: NOT_SUPPORTED\nmore lines"))
        == "RuntimeError: cuDNN error: NOT_SUPPORTED"
    )
    assert v.error_line(ValueError("  padded  \n")) == "ValueError: padded"
    assert v.error_line(KeyError()) == "KeyError" and v.error_line(OSError("\n")) == "OSError"
