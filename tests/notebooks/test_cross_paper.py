"""Smoke run of the cross-paper chapter: it opens with its method on a tiny case, hides its setup
cells, states the released-XE outlier, and publishes a claims table with computed verdicts."""

import nbformat

from lib.report import VERDICTS


def test_cross_paper_publishes_claims(smoke_published, smoke_notebook) -> None:
    out = smoke_published("cross_paper")
    assert out["scale_summary"].startswith("smoke: synthetic logits")
    assert len(out["claims"]) == 7
    assert all(c["verdict"] in VERDICTS and c["paper_own"] for c in out["claims"])
    # Temperature scaling never raises NLL on the data it was fitted to; on the other half of a
    # synthetic over-confident model it must lower ECE.
    assert out["ece_overconfidence_ts"] < out["ece_overconfidence_raw"]
    failures = {row["failure"] for row in out["best_fix"]}
    assert failures == {"over-confidence", "shift", "routing", "deferral", "training loss"}
    cells = [c for c in nbformat.read(str(smoke_notebook("cross_paper")), as_version=4).cells if c.cell_type == "code"]
    setup = [c for c in cells if "page.start(" in c.source or "page.finish(" in c.source]
    assert len(setup) == 2 and all("remove-cell" in c.metadata.get("tags", []) for c in setup)
    text = "".join(str(v) for c in cells for o in c.outputs for v in [o.get("text", ""), *o.get("data", {}).values()])
    assert "per-expert temperature" in text and "outlier" in text  # the method's tiny case; the XE note
