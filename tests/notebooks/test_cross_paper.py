"""Smoke run of the cross-paper chapter: it publishes a claims table with computed verdicts."""

from lib.report import VERDICTS


def test_cross_paper_publishes_claims(smoke_published) -> None:
    out = smoke_published("cross_paper")
    assert out["scale_summary"].startswith("smoke: synthetic logits")
    assert len(out["claims"]) >= 6
    assert all(c["verdict"] in VERDICTS for c in out["claims"])
    # Temperature scaling never raises NLL on the data it was fitted to; on the other half of a
    # synthetic over-confident model it must lower ECE.
    assert out["ece_overconfidence_ts"] < out["ece_overconfidence_raw"]
    failures = {row["failure"] for row in out["best_fix"]}
    assert failures == {"over-confidence", "shift", "routing", "deferral", "training loss"}
