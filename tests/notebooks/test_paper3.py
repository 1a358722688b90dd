"""Paper 3's notebooks run at smoke scale (synthetic logits, seconds) and publish sane numbers.

The synthetic data (lib.data.mmlu.synthetic_mmlu) is calibrated by construction for the base
models and overconfident (logits x kappa) for the instruct ones, so some outcomes must hold:
temperature scaling lowers the instruct model's ECE, and calibrated cascading beats random routing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest

from lib import report
from lib.book import execute_notebook


def published(path: Path) -> dict:
    """Numbers glued by the executed notebook (lib.report.read_published), tolerating glue's
    mime-prefixed encoding ("application/papermill.record/text/plain") if the reader misses it."""
    found = report.read_published(path)
    if found:
        return found
    nb = nbformat.read(str(path), as_version=4)
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            meta = out.get("metadata", {}).get("scrapbook")
            if meta:
                text = out.get("data", {}).get(meta.get("mime_prefix", "") + "text/plain")
                if text is not None:
                    try:
                        found[meta["name"]] = ast.literal_eval("".join(text))
                    except (ValueError, SyntaxError):
                        found[meta["name"]] = "".join(text)
    return found


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    cache: dict[str, dict] = {}

    def _run(name: str) -> dict:
        if name not in cache:
            out = tmp_path_factory.mktemp(name) / f"{name}.ipynb"
            cache[name] = published(execute_notebook(name, scale="smoke", output=out, progress=False))
        return cache[name]

    return _run


def test_calibration_smoke(run):
    p = run("calibration")
    assert p["scale_summary"].startswith("smoke")
    assert p["ece_after"] < p["ece_before"]  # instruct models are overconfident by construction
    for key in ("ece_8b_base_test_after", "ece_70b_instruct_test_after", "ece_resnet50_ce_test_after"):
        assert 0 <= p[key] < 0.1
    assert p["min_spearman"] > 0.8


def test_cascading_smoke(run):
    p = run("cascading")
    for key in ("apgr_cc", "apgr_uc", "apgr_cc_base", "apgr_uc_base", "apgr_shift_min"):
        assert 0 <= p[key] <= 1, key
    assert p["apgr_rc"] == pytest.approx(0.5, abs=0.05)  # one random routing draw per split; E[APGR] = 0.5
    assert p["apgr_cc"] >= p["apgr_rc"] and p["apgr_cc_base"] >= p["apgr_rc"]
    assert set(p["apgr_by_calibrator"]) == {"temperature", "platt", "histogram"}
    assert set(p["apgr_by_bins"]) == {"5", "15", "50", "100"}
    assert all(0.5 < v <= 1 for v in p["apgr_by_bins"].values())


def test_same_size_smoke(run):
    p = run("same_size")
    for key in ("mmlu_8b", "mmlu_70b", "cifar10"):
        acc = p[f"same_size_acc_{key}"]
        assert all(0 <= v <= 1 for v in acc.values())
        # Routing can never beat the oracle that picks whichever model is right.
        assert acc["routed (TS, bins on first)"] <= acc["oracle (either right)"] + 1e-9
        assert p[f"same_size_gain_{key}"] == pytest.approx(
            acc["routed (TS, bins on first)"] - max(acc["first alone"], acc["second alone"]), abs=2e-3)


def test_cleaning_smoke(run):
    p = run("cleaning")
    prec, det = p["cleaning_precisions"], p["cleaning_detections"]
    assert all(0 <= v <= 1 for v in prec + det)
    assert all(b >= a - 1e-12 for a, b in zip(det, det[1:]))  # detection grows with k
    assert det[-1] == p["cleaning_detection_basic"] and prec[0] == p["cleaning_precision_k1"]
    assert 0 <= p["cl_precision"] <= 1 and 0 <= p["cl_detection"] <= 1
    assert p["mmlu_flagged_both_pairs_k3"] <= p["mmlu_flagged_instruct_k3"]
