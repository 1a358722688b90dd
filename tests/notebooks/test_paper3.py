"""Paper 3's notebooks run at smoke scale (synthetic logits, seconds) and publish sane numbers.

The synthetic data (lib.data.mmlu.synthetic_mmlu) is calibrated by construction for the base
models and overconfident (logits x kappa) for the instruct ones, so some outcomes must hold:
temperature scaling lowers the instruct model's ECE, and calibrated cascading beats random routing.
Each page opens with its method computed on a tiny batch, hides its setup cells, and publishes its
claims table; the overview's "Try it" commands run.
"""

from __future__ import annotations

import re
import shlex

import nbformat
import pytest

from calibook.page import read_published
from lib import report
from lib.config import repo_root

PAGES = ("calibration", "cascading", "same_size", "cleaning")

#: What each page's first visible code cell (its method on a tiny batch) must print.
FORMULA_OUTPUT = {
    "calibration": "'ECE, 2 bins': 0.4",
    "cascading": "'APGR of the exercise': 0.625",
    "same_size": "'routed': 1.0",
    "cleaning": "'k = 1': array([4])",
}


def test_calibration_smoke(smoke_notebook):
    p = read_published(smoke_notebook("calibration"))
    assert p["scale_summary"].startswith("smoke")
    assert p["ece_after"] < p["ece_before"]  # instruct models are overconfident by construction
    for key in ("ece_8b_base_test_after", "ece_70b_instruct_test_after", "ece_resnet50_ce_test_after"):
        assert 0 <= p[key] < 0.1
    assert p["min_spearman"] > 0.8


def test_cascading_smoke(smoke_notebook):
    p = read_published(smoke_notebook("cascading"))
    for key in ("apgr_cc", "apgr_uc", "apgr_cc_base", "apgr_uc_base", "apgr_shift_min"):
        assert 0 <= p[key] <= 1, key
    assert p["apgr_rc"] == pytest.approx(0.5, abs=0.05)  # one random routing draw per split; E[APGR] = 0.5
    assert p["apgr_cc"] >= p["apgr_rc"] and p["apgr_cc_base"] >= p["apgr_rc"]
    assert set(p["apgr_by_calibrator"]) == {"temperature", "platt", "histogram"}
    assert set(p["apgr_by_bins"]) == {"5", "15", "50", "100"}
    assert all(0.5 < v <= 1 for v in p["apgr_by_bins"].values())


def test_same_size_smoke(smoke_notebook):
    p = read_published(smoke_notebook("same_size"))
    for key in ("mmlu_8b", "mmlu_70b", "cifar10"):
        acc = p[f"same_size_acc_{key}"]
        assert all(0 <= v <= 1 for v in acc.values())
        # Routing can never beat the oracle that picks whichever model is right.
        assert acc["routed (TS, bins on first)"] <= acc["oracle (either right)"] + 1e-9
        assert p[f"same_size_gain_{key}"] == pytest.approx(
            acc["routed (TS, bins on first)"] - max(acc["first alone"], acc["second alone"]), abs=2e-3
        )


def test_cleaning_smoke(smoke_notebook):
    p = read_published(smoke_notebook("cleaning"))
    prec, det = p["cleaning_precisions"], p["cleaning_detections"]
    assert all(0 <= v <= 1 for v in prec + det)
    assert all(b >= a - 1e-12 for a, b in zip(det, det[1:]))  # detection grows with k
    assert det[-1] == p["cleaning_detection_basic"] and prec[0] == p["cleaning_precision_k1"]
    assert 0 <= p["cl_precision"] <= 1 and 0 <= p["cl_detection"] <= 1
    assert p["mmlu_flagged_both_pairs_k3"] <= p["mmlu_flagged_instruct_k3"]


@pytest.mark.parametrize("name", PAGES)
def test_page_teaches_its_method_hides_setup_and_publishes_claims(smoke_notebook, name):
    path = smoke_notebook(name)
    claims = read_published(path)["claims"]
    assert claims and all(set(c) >= {"claim", "paper", "ours", "verdict", "paper_own"} for c in claims)
    assert all(c["verdict"] in report.VERDICTS for c in claims)
    cells = [c for c in nbformat.read(str(path), as_version=4).cells if c.cell_type == "code"]
    setup = [c for c in cells if "page.start(" in c.source or "page.finish(" in c.source]
    assert len(setup) == 2 and all("remove-cell" in c.metadata.get("tags", []) for c in setup)
    shown = [
        c for c in cells if not set(c.metadata.get("tags", [])) & {"remove-cell", "parameters", "injected-parameters"}
    ]
    first = "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in shown[0].outputs)
    assert FORMULA_OUTPUT[name] in first, first
    lines = [line for c in cells for line in c.source.splitlines() if line.strip()]
    assert len(lines) <= 110 and max(len(line) for line in lines) <= 88  # thin notebooks, code fits the column


def try_it_commands() -> list[tuple[str, dict[str, object]]]:
    """The overview's "Try it" commands as (page, parameters)."""
    text = (repo_root() / "book" / "ccc" / "overview.md").read_text()
    section = text.split("## Try it", 1)[1].split("\n## ", 1)[0]
    out = []
    for cmd in re.findall(r"`(python -m calibook run [^`]+)`", section):
        words = shlex.split(cmd)[4:]
        params = {words[i + 1]: float(words[i + 2]) if "." in words[i + 2] else int(words[i + 2])
                  for i in range(1, len(words), 3)}  # fmt: skip
        out.append((words[0], params))
    return out


@pytest.mark.smoke_runs(*try_it_commands())
def test_try_it_commands_run_at_smoke_scale(smoke_notebook):
    commands = try_it_commands()
    assert len(commands) >= 2
    for name, params in commands:
        assert read_published(smoke_notebook(name, **params))["scale_summary"].startswith("smoke"), (name, params)
