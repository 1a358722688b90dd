"""calibook.paper_scale: a page reads what the queue published, counts the seeds, trains nothing."""

import subprocess
import sys

import pytest

import lib.config
import calibook.gpu.queue as q
from calibook import paper_scale
from calibook.runs import RunMissing, training


@pytest.fixture()
def results(tmp_path, monkeypatch):
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CALIBOOK_RESULTS", str(tmp_path / "results"))
    return tmp_path / "results"


def test_should_train_reads_at_paper_scale_unless_asked() -> None:
    assert paper_scale.should_train("auto", "cpu") and paper_scale.should_train("auto", "smoke")
    assert not paper_scale.should_train("auto", "paper")
    assert paper_scale.should_train("yes", "paper") and not paper_scale.should_train("no", "smoke")
    with pytest.raises(ValueError, match="train"):
        paper_scale.should_train("maybe", "cpu")
    with pytest.raises(ValueError, match="scale"):
        paper_scale.should_train("auto", "huge")


def test_nothing_published_says_so(results) -> None:
    assert paper_scale.records("cifar10h") == []
    assert "results/cifar10h/" in paper_scale.table("cifar10h")
    cov = paper_scale.coverage("cifar10h")
    assert len(cov) == 6 and set(cov["coverage"]) == {"0 of 5 seeds"}  # the paper's five seeds
    with pytest.raises(ValueError, match="train yes"):
        paper_scale.require([], "cifar10h")


def test_a_partial_queue_is_read_back_with_k_of_n_and_nothing_trains(results, tmp_path) -> None:
    import shutil

    published = q.run_queue(["cifar10h"], minutes=30, scale="smoke", log=lambda s: None)
    fgr = [p for p in published if "/fgr/" in q.read_record(p)["queue"]["id"]]
    assert len(fgr) == 1
    for f in fgr[0].parent.glob(f"{fgr[0].stem}*"):
        f.unlink()  # FGR's run did not finish in this window
    shutil.rmtree(tmp_path / "cache")  # nothing to read but results/
    cov = paper_scale.coverage("cifar10h", scale="smoke").set_index("method")["coverage"]
    assert cov["fgr"] == "0 of 1 seeds" and cov["vanilla"] == "1 of 1 seeds"
    assert len(paper_scale.records("cifar10h", scale="smoke")) == len(published) - 1

    from lib.moe import experiment as exp
    from lib.moe.grid import run_grid

    cfg = lib.config.settings("cifar10h", "smoke")
    data = exp.cifar10h_data(cfg)
    got = run_grid(exp.train_configs(cfg), data, train=False)
    methods = [r["method"] for r in got]
    assert "fgr" not in methods and "mocae" in methods  # MoCaE derives from the published Vanilla run
    assert len(methods) == len(exp.train_configs(cfg)) - 1
    made_here = list((tmp_path / "cache").glob("runs/moe/*/*"))
    assert [p.name for p in made_here if p.name != ".lock"] in (
        ["predictions.npz", "result.json"],
        ["result.json", "predictions.npz"],
    )  # MoCaE's only
    with training(False), pytest.raises(RunMissing):
        from lib.moe.train import train_run

        train_run(next(c for c in exp.train_configs(cfg) if c.method == "fgr"), data)

    table = paper_scale.table("cifar10h", scale="smoke")
    assert "FGR" not in set(table["Method"]) and set(table["coverage"]) == {"1 of 1 seeds"}
    assert "MoCaE" in set(table["Method"])
    # the paper's values beside ours: Table 1 kept one digit (Robust Filtered's ECE, 0.013)
    paper = table.set_index("Method")["paper"]
    assert paper["Robust Filtered"] == "ECE .013" and paper["Vanilla MoE"] == "digits lost in the text extraction"

    # PACS's layout, Table 2 beside ours, on the same records (the sketch target's printed rows)
    from lib.moe.pages.pacs import PAPER_TABLE2
    from lib.moe.tables import fmt, paper_scale_table

    items, got = q.plan(["cifar10h"], "smoke"), q.published("cifar10h")
    pacs = paper_scale_table(items, got, paper=PAPER_TABLE2["sketch"]).set_index("Method")
    acc, se = PAPER_TABLE2["sketch"]["robust_filtered"][:2]
    assert pacs.loc["Robust Filtered", "Acc (paper)"] == fmt(acc, se) and fmt(acc, se).startswith(".")
    assert pacs.loc["Vanilla MoE", "Acc (ours)"] == table.set_index("Method").loc["Vanilla MoE", "Accuracy"]
    assert pacs.loc["FGR", "Acc (ours)"] == "—" and pacs.loc["FGR", "coverage"] == "0 of 1 seeds"


def test_l2d_section_counts_published_runs_and_the_page_waits_for_a_whole_sweep(results, tmp_path) -> None:
    """Paper 2's published runs become the sweep table with "k of n runs"; a page that needs the
    whole sweep stops with the count until every run is there."""
    got = q.run_queue(["l2d_cifar10"], minutes=30, scale="smoke", log=lambda s: None)
    table = paper_scale.table("l2d_cifar10", scale="smoke")
    assert len(table) == len(got) and set(table["coverage"]) == {"1 of 1 runs"}
    paper_scale.require_complete("l2d_cifar10", scale="smoke")  # all there: no error
    first = got[0]
    for f in first.parent.glob(f"{first.stem}*"):
        f.unlink()
    with pytest.raises(ValueError, match="softmax: .* of .* runs"):
        paper_scale.require_complete("l2d_cifar10", scale="smoke")
    assert len(paper_scale.table("l2d_cifar10", scale="smoke")) == len(got) - 1


def test_losses_section_is_the_loss_table_of_the_published_runs(results) -> None:
    from lib.rr import experiment as rx

    assert "results/losses_cifar10/" in paper_scale.table("losses_cifar10", scale="smoke")
    got = q.run_queue(["losses_cifar10"], minutes=30, scale="smoke", log=lambda s: None)
    plan = q.plan(["losses_cifar10"], "smoke")
    assert len(got) == len(plan) and len({it.config["loss"] for it in plan}) == len(
        set(rx.TABLE_LOSSES) | set(rx.CSF_LOSSES)
    )
    table = paper_scale.table("losses_cifar10", scale="smoke")
    assert list(table.index) == [rx.LABELS[n] for n in rx.TABLE_LOSSES]
    xe = q.published("losses_cifar10")[f"losses_cifar10/xe/k{plan[0].config['coverage']}/nu{plan[0].config['nu']}/s0"]
    assert table.loc["XE", "ECE (ours)"] == pytest.approx(100 * xe["metrics"]["ece"])
    assert table.loc["XE", "ECE (paper)"] == 1.99  # Table 2's WRN row, the network of paper scale
    assert set(table["runs"]) == {f"{len(plan)} of {len(plan)} runs of the page"}


def test_paper_section_says_which_tables_a_page_shows(results) -> None:
    """Below paper scale a page's section is its published paper-scale table (here: none yet); at
    paper scale it points to the page's own tables."""
    for page in ("cifar10h", "sensitivity", "l2d_cifar10", "losses_cifar10", "civilcomments"):
        assert paper_scale.paper_section(page, "cpu") == paper_scale.none_yet(page)
    assert "ran at paper scale" in paper_scale.paper_section("pacs", "paper", target="sketch")
    assert paper_scale.coverage_cell("cifar10h", reading=False, scale="cpu").startswith("Every run above")
    assert set(paper_scale.coverage_cell("cifar10h", reading=True, scale="paper")["coverage"]) == {"0 of 5 seeds"}


def test_pages_read_results_without_the_gpu_window_code() -> None:
    """calibook.paper_scale (what notebooks import) reads results/ through calibook.results and loads no calibook.gpu module."""
    code = "import sys, calibook.paper_scale; print(sorted(m for m in sys.modules if m.startswith('calibook.gpu')))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(lib.config.repo_root())},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert out.stdout.strip() == "[]"
