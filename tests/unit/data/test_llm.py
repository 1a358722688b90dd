"""lib.data.mmlu and lib.data.logits: synthetic stand-ins follow their generative model; the real
loaders are checked when ../shared/data is present (skipped otherwise)."""

from __future__ import annotations

import numpy as np
import pytest

from lib.data.locate import DataNotFoundError
from lib.data import logits as L
from lib.data import mmlu as M
from lib.data.locate import shared_data_dir

HAVE_MMLU = (shared_data_dir() / "mmlu-llama31" / "questions.csv").exists()
HAVE_RESNET = (shared_data_dir() / "cifar10-resnet50-logits" / "resnet50_ce_test.npz").exists()


def test_mmlu_categories_cover_57_subjects_once():
    subjects = [s for subs in M.CATEGORIES.values() for s in subs]
    assert len(subjects) == 57 == len(set(subjects))


def test_synthetic_mmlu_structure_and_generative_model():
    d = M.synthetic_mmlu(4000, seed=0)
    assert len(d) == 4000 and d.models == M.MODELS
    assert list(d.questions.columns[:8]) == ["subject", "row", "question", "A", "B", "C", "D", "answer"]
    np.testing.assert_array_equal(d.questions["answer"].map("ABCD".index), d.labels)
    # Larger skill m -> higher accuracy; the closed-form accuracy of argmax(m 1[y] + N(0,1)) over 4
    # classes is P(m + e0 > max(e1, e2, e3)), checked by a brute-force Monte Carlo.
    e = np.random.default_rng(1).standard_normal((200000, 4))
    for m in d.models:
        skill = M.SYNTHETIC_MODELS[m][0]
        expected = np.mean(skill + e[:, 0] > e[:, 1:].max(1))
        acc = np.mean(d.logits[m].argmax(1) == d.labels)
        assert acc == pytest.approx(expected, abs=0.03)
    assert (
        M.synthetic_mmlu(50, seed=2).logits[M.MODELS[0]].tolist()
        == M.synthetic_mmlu(50, seed=2).logits[M.MODELS[0]].tolist()
    )


def test_synthetic_temperature_is_the_overconfidence_factor():
    from lib.calibration.posthoc import TemperatureScaler

    d = M.synthetic_mmlu(6000, seed=3)
    for m in ("llama-3.1-8b-instruct", "llama-3.1-8b-base"):
        assert TemperatureScaler().fit(d.logits[m], d.labels).temperature == pytest.approx(
            M.SYNTHETIC_MODELS[m][1], rel=0.1
        )


def test_synthetic_resnet_logits_pairable():
    z, y = L.synthetic_resnet_logits(500, ("ce", "focal"), seed=0)
    assert z["ce"].shape == z["focal"].shape == (500, 10) and y.shape == (500,)


def test_missing_data_error_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("CALIBOOK_DATA", str(tmp_path))
    monkeypatch.setattr("lib.data.locate.shared_data_dir", lambda: tmp_path / "nothing")
    monkeypatch.setattr("lib.data.locate.local_data_cache", lambda: tmp_path / "cache")
    with pytest.raises(DataNotFoundError, match="How to get it"):
        M.load_mmlu()
    with pytest.raises(DataNotFoundError, match="How to get it"):
        L.load_resnet50_logits("ce")


def test_mmlu_loader_rejects_misaligned_logits(tmp_path):
    folder = tmp_path / "mmlu-llama31"
    folder.mkdir()
    (folder / "questions.csv").write_text(
        "subject,row,question,A,B,C,D,answer\nanatomy,0,q0,a,b,c,d,A\nanatomy,1,q1,a,b,c,d,C\n"
    )
    (folder / "logits_llama-3.1-8b-base.csv").write_text(
        "subject,row,logit_A,logit_B,logit_C,logit_D\nanatomy,1,1,2,3,4\nanatomy,0,4,3,2,1\n"
    )
    d = M.load_mmlu(tmp_path, models=("llama-3.1-8b-base",))
    # Rows are aligned by (subject, row), not by file order.
    np.testing.assert_array_equal(d.logits["llama-3.1-8b-base"], [[4, 3, 2, 1], [1, 2, 3, 4]])
    np.testing.assert_array_equal(d.labels, [0, 2])
    (folder / "logits_llama-3.1-8b-base.csv").write_text(
        "subject,row,logit_A,logit_B,logit_C,logit_D\nanatomy,0,1,2,3,4\nanatomy,2,4,3,2,1\n"
    )
    with pytest.raises(ValueError, match="models"):
        M.load_mmlu(tmp_path, models=("llama-3.1-8b-base",))


@pytest.mark.skipif(not HAVE_MMLU, reason="../shared/data/mmlu-llama31 not present")
def test_real_mmlu_loads_aligned_with_expected_accuracies():
    d = M.load_mmlu()
    assert len(d) == 14042 and d.questions["subject"].nunique() == 57
    acc = {m: float(np.mean(d.logits[m].argmax(1) == d.labels)) for m in d.models}
    # README: 8B-instruct about 0.59, 70B-instruct about 0.80.
    assert acc["llama-3.1-8b-instruct"] == pytest.approx(0.59, abs=0.02)
    assert acc["llama-3.1-70b-instruct"] == pytest.approx(0.80, abs=0.02)
    assert set(d.questions["category"]) == set(M.CATEGORIES)


@pytest.mark.skipif(not HAVE_RESNET, reason="../shared/data/cifar10-resnet50-logits not present")
def test_real_resnet_logits_pair_and_degenerate_run():
    z, y = L.load_resnet50_pair(("ce", "focal"))
    assert z["ce"].shape == (10000, 10) and y.shape == (10000,)
    assert np.mean(z["ce"].argmax(1) == y) > 0.85  # a trained model, same order as the targets
    assert np.mean(z["focal"].argmax(1) == y) > 0.85
    with pytest.raises(ValueError, match="allow_degenerate"):
        L.load_resnet50_logits("inverse_focal")
    zi, _ = L.load_resnet50_logits("inverse_focal", allow_degenerate=True)
    assert np.mean(zi.argmax(1) == y) < 0.05
