"""lib.data.bundle: the image and text bundles satisfy the protocol; other objects are named and refused."""

import pytest

from lib.data.bundle import Bundle, check_bundle
from lib.data.synthetic import synthetic_images


def test_an_image_bundle_is_a_bundle() -> None:
    b = synthetic_images(n_train=16, n_val=8, n_test=8, size=8, seed=0)
    assert isinstance(b, Bundle) and check_bundle(b) is b
    assert b.sizes()["train"] == 16 and len(b.fingerprint()) > 0


def test_a_text_bundle_is_a_bundle() -> None:
    from lib.data.synthetic import synthetic_comments

    b = synthetic_comments(n=40, seed=0)
    assert isinstance(b, Bundle) and b.kind == "text" and b.num_classes == 2


def test_anything_else_is_refused_naming_what_is_missing() -> None:
    with pytest.raises(ValueError, match="data: .*dict lacks .*fingerprint"):
        check_bundle({"train_y": 1})
    assert not isinstance(object(), Bundle)
