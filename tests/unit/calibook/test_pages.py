"""calibook.pages and lib.page.Page: one page per notebook, and each page's plan counted by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from calibook import pages
from lib.config import repo_root, settings
from lib.engine import deadline
from lib.engine.plan import Item
from lib.page import Page


def test_every_notebook_has_one_page_in_its_papers_package() -> None:
    notebooks = sorted(p.stem for p in (repo_root() / "notebooks").glob("*.py"))
    found = [p.name for p in pages.all_pages()]
    assert sorted(found) == notebooks and len(set(found)) == len(found)
    for p in pages.all_pages():
        if p.paper != "book":  # its own module, lib/<paper>/pages/<notebook>.py, holds it as PAGE
            assert __import__(f"lib.{p.paper}.pages.{p.name}", fromlist=["PAGE"]).PAGE is p, p.name


def test_the_queue_goes_by_claims_per_gpu_minute() -> None:
    # paper 1's small nets first (CIFAR-10H, its sweeps, PACS, CivilComments), the WRN plans (GPU-hours) last
    assert pages.queued_names() == ("cifar10h", "sensitivity", "pacs", "civilcomments", "l2d_cifar10", "losses_cifar10")


def test_an_unknown_page_or_target_is_named() -> None:
    with pytest.raises(ValueError, match="page: unknown page 'cifar10'.*cifar10h"):
        pages.get("cifar10")
    with pytest.raises(ValueError, match="target: pacs has no target 'mars'"):
        pages.get("pacs").plan("smoke", target="mars")
    with pytest.raises(ValueError, match="page: calibration has no runs"):
        pages.get("calibration").runs({})


def test_cifar10h_plans_every_method_and_seed_mocae_post_hoc() -> None:
    page, cfg = pages.get("cifar10h"), settings("cifar10h", "smoke")
    runs = page.runs(cfg, None)
    assert len(runs) == len(cfg["methods"]) * len(cfg["seeds"])  # 7 methods x seeds
    assert {it.method for it in runs if it.post_hoc} == {"mocae"}
    planned = page.plan("smoke")
    assert len(planned) == (len(cfg["methods"]) - 1) * len(cfg["seeds"])  # MoCaE comes with Vanilla
    assert len({it.id for it in planned}) == len(planned)


def test_sensitivity_plans_each_sweep_point_once() -> None:
    page, cfg = pages.get("sensitivity"), settings("sensitivity", "smoke")
    # smoke: lams [0.5, 2, 5] at warmup 1, warmups [0, 1, 2] (all <= 2 epochs) at lambda 2, one seed;
    # (lambda 2, warmup 1) is in both sweeps: 1 vanilla + 3 + 3 - 1 = 6 runs
    assert (cfg["lams"], cfg["warmups"], cfg["lam"], cfg["warmup"], cfg["epochs"]) == (
        [0.5, 2.0, 5.0],
        [0, 1, 2],
        2.0,
        1,
        2,
    )
    runs = page.plan("smoke")
    assert len(runs) == 6
    assert sorted((it.method, it.config.lam, it.config.warmup_epochs) for it in runs if it.method == "robust") == [
        ("robust", 0.5, 1),
        ("robust", 2.0, 0),
        ("robust", 2.0, 1),
        ("robust", 2.0, 2),
        ("robust", 5.0, 1),
    ]
    short = {**cfg, "epochs": 1}  # a warmup longer than the run is not planned
    assert max(it.config.warmup_epochs for it in page.runs(short, None) if it.method == "robust") == 1


def test_l2d_and_losses_plans() -> None:
    l2d = pages.get("l2d_cifar10")
    cfg = settings("l2d_cifar10", "smoke")
    values = len(cfg["num_experts"]) + len(cfg["dependence_p"]) + len(cfg["specialized_experts"])
    assert len(l2d.plan("smoke")) == values * 2 * int(cfg["seeds"])  # two surrogates
    rr = pages.get("losses_cifar10")
    cfg = settings("losses_cifar10", "smoke")  # coverages [0.5, 0.8] x nus [0.1], default (0.8, 0.1)
    from lib.rr.experiment import CSF_LOSSES, TABLE_LOSSES

    runs = rr.plan("smoke")
    assert len(runs) == len(set(TABLE_LOSSES) | set(CSF_LOSSES)) + 2 * 1 - 1
    assert [it.config["coverage"] for it in runs if it.method.startswith("au (")] == [0.5]


def test_pacs_plans_four_targets() -> None:
    page = pages.get("pacs")
    cfg = settings("pacs", "smoke")
    runs = page.plan("smoke")
    assert [t for t in dict.fromkeys(it.target for it in runs)] == ["photo", "art_painting", "cartoon", "sketch"]
    assert len(runs) == 4 * (len(cfg["methods"]) - 1) * len(cfg["seeds"])
    assert len(page.plan("smoke", target="sketch")) == len(runs) // 4


def test_train_one_at_a_time_stops_at_the_deadline() -> None:
    done: list[str] = []
    now = [0.0]

    def run_one(it: Item, cfg: dict, data: None) -> dict:
        now[0] += 6.0  # each run takes 6 s of the fake clock
        return {"id": it.id}

    class Toy(Page):
        name, paper, title = "x", "book", "test"

        def runs(self, cfg: dict, target: str | None = None) -> list[Item]:
            return []

        def run_one(self, item: Item, cfg: dict, data: None) -> dict:
            return run_one(item, cfg, data)

    page = Toy()
    items = [Item("x", f"x/{i}", 0, 1, "m") for i in range(3)]
    page.train(items, {}, None, on_done=lambda it, rec: done.append(rec["id"]))
    assert done == ["x/0", "x/1", "x/2"]
    now[0], done[:] = 0.0, []
    with deadline.deadline(10.0, lambda: now[0]), pytest.raises(deadline.DeadlineReached):
        page.train(items, {}, None, on_done=lambda it, rec: done.append(rec["id"]))
    assert done == ["x/0", "x/1"]  # started at 0 s and 6 s; at 12 s the deadline (10 s) has passed


def test_a_page_without_runs_trains_nothing() -> None:
    with pytest.raises(ValueError, match="page: calibration has no runs to train"):
        pages.get("calibration").train([Item("calibration", "c/0", 0, 1, "m")], {}, None)
    assert pages.get("calibration").plan("smoke") == []


def test_registry_keeps_notebook_tools_out() -> None:
    """The queue's machine has no notebook tools: building the registry imports none of them."""
    import subprocess
    import sys

    code = (
        "import sys; import calibook.pages as p; p.all_pages(); "
        "bad = [m for m in ('papermill', 'altair', 'nbformat', 'myst_nb', 'IPython') if m in sys.modules]; "
        "print(bad); sys.exit(bool(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(repo_root()), capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
