"""calibook.book and calibook.cli: the notebook list comes from the table of contents; bad names and
parameters are refused before anything runs; a failed run never replaces the last good page."""

import ast
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from unittest import mock

import nbformat
import papermill
import pytest
import yaml
from papermill.exceptions import PapermillExecutionError

import calibook.pages
from calibook import book, cli, notebooks
from lib.config import repo_root
from lib.engine import progress


def test_notebook_names_follow_the_toc() -> None:
    names = notebooks.notebook_names()
    assert names[:2] == ["routing_theory", "cifar10h"]
    assert "pacs" in names and len(names) == len(set(names))


def test_unknown_notebook_and_scale_are_refused() -> None:
    with pytest.raises(ValueError, match="notebook: unknown value 'pacz'.*'pacs'.*did you mean 'pacs'"):
        notebooks.check_notebook("pacz")
    with pytest.raises(ValueError, match="scale: unknown value"):
        book.execute_notebook("pacs", scale="huge")
    with pytest.raises(SystemExit):
        cli.main(["run", "pacs", "--scale", "huge"])


@pytest.mark.parametrize("name", notebooks.notebook_names())
def test_papermill_shows_every_parameter_with_type_default_and_comment(name: str) -> None:
    """`papermill --help-notebook` (papermill.inspect_notebook) lists every assignment of the
    parameters cell; its type-hint regex skips annotations like `int | None`."""
    nb = nbformat.read(str(repo_root() / "notebooks" / f"{name}.ipynb"), as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    assigned = [n.target.id for n in ast.parse(cell.source).body if isinstance(n, ast.AnnAssign)]
    plain = [n for n in ast.parse(cell.source).body if isinstance(n, ast.Assign)]
    assert not plain, f"{name}: parameters without a type hint"
    shown = notebooks.notebook_parameters(name)
    assert list(shown) == assigned, f"{name}: papermill shows {list(shown)}, the cell assigns {assigned}"
    for key, p in shown.items():
        assert p["inferred_type_name"] in ("str", "int", "float", "bool"), (name, key, p)
        assert p["default"] and p["help"], (name, key, p)
    assert shown["scale"]["default"] == '"cpu"'


def test_a_parameters_default_is_read_from_its_cell() -> None:
    assert notebooks.parameter_default("pacs", "target") == "photo"  # the page the book builds
    assert notebooks.parameter_default("cifar10h", "scale") == "cpu"
    with pytest.raises(ValueError, match="^key: notebook 'pacs' has no parameter 'lam'"):
        notebooks.parameter_default("pacs", "lam")


def test_parameters_are_checked_and_converted() -> None:
    assert notebooks.check_parameters("pacs", "smoke", {"epochs": "3", "target": "sketch"}) == {
        "epochs": 3,
        "target": "sketch",
    }
    assert notebooks.check_parameters("civilcomments", "smoke", {"data_dir": "3"}) == {"data_dir": "3"}  # str stays
    assert notebooks.check_parameters("pacs", "smoke", {"target": "art"}) == {"target": "art_painting"}  # an alias
    with pytest.raises(ValueError, match="target: unknown PACS domain 'mars'"):
        notebooks.check_parameters("pacs", "smoke", {"target": "mars"})
    assert notebooks.check_parameters("cleaning", "smoke", {"noise_rate": "1"}) == {"noise_rate": 1.0}
    with pytest.raises(ValueError, match=r"epoch: not a parameter of notebook 'pacs'.*did you mean 'epochs'\?"):
        notebooks.check_parameters("pacs", "smoke", {"epoch": "3"})
    with pytest.raises(ValueError, match="epochs: expected int"):
        notebooks.check_parameters("pacs", "smoke", {"epochs": "abc"})
    with pytest.raises(ValueError, match="epochs: expected int"):
        notebooks.check_parameters("pacs", "smoke", {"epochs": 2.5})
    with pytest.raises(ValueError, match="epochs: must be >= 0"):
        notebooks.check_parameters("pacs", "smoke", {"epochs": "-2"})
    with pytest.raises(ValueError, match="scale: set it with --scale"):
        notebooks.check_parameters("pacs", "smoke", {"scale": "huge"})


@pytest.fixture()
def fake_papermill(monkeypatch):
    """papermill.execute_notebook replaced by a stub that writes the output (or fails) instantly."""
    calls: list[dict] = []

    def run(source, output, parameters, **kw):
        env = {k: os.environ.get(k) for k in (*book.QUIET_KERNEL_ENV, progress.PREFIX)}
        calls.append({"parameters": parameters, "env": env, "progress_bar": kw.get("progress_bar")})
        Path(output).write_text(json.dumps({"ran": parameters}))
        if parameters.get("epochs") == 7:
            raise PapermillExecutionError(3, 1, "src", "RuntimeError", "CUDA out of memory", [])
        if parameters.get("epochs") == 9:  # stopped from outside, as `timeout` or a scheduler does
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(papermill, "execute_notebook", run)
    return calls


def test_cli_refuses_bad_parameters_before_running(fake_papermill, capsys) -> None:
    assert cli.main(["run", "pacs", "--scale", "smoke", "-p", "epoch", "3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean 'epochs'?" in err and "Traceback" not in err
    assert cli.main(["run", "pacz"]) == 2
    assert "did you mean 'pacs'?" in capsys.readouterr().err
    assert cli.main(["run", "pacs", "--scale", "smoke", "-p", "target", "mars"]) == 2
    assert "target: unknown PACS domain 'mars'" in capsys.readouterr().err
    assert fake_papermill == []  # nothing ran
    with pytest.raises(ValueError):
        cli.main(["--debug", "run", "pacz"])


def test_failed_run_keeps_the_last_good_page(fake_papermill, tmp_path, capsys) -> None:
    out = tmp_path / "pacs.ipynb"
    book.execute_notebook("pacs", "smoke", {"target": "sketch"}, output=out, progress=False)
    good = out.read_text()
    assert json.loads(good)["ran"] == {"scale": "smoke", "target": "sketch"}
    with pytest.raises(PapermillExecutionError):
        book.execute_notebook("pacs", "smoke", {"epochs": 7}, output=out, progress=False)
    assert out.read_text() == good
    assert '"epochs": 7' in (tmp_path / "pacs.failed.ipynb").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pacs.failed.ipynb", "pacs.ipynb"]  # no temp files


def test_a_killed_runs_hidden_copy_is_removed_and_a_live_ones_kept(fake_papermill, tmp_path) -> None:
    """SIGKILL leaves the hidden running copy behind (nothing runs to keep it as a failed page): the
    next run of the page removes it, unless its process is still alive (another run of the page) or
    it is another machine's (a build/ shared between machines: a process id says nothing there)."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    orphan = tmp_path / f".pacs.{book._owner(dead.pid)}.abc.running.ipynb"
    live = tmp_path / f".pacs.{book._owner()}.xyz.running.ipynb"
    other = tmp_path / f".sketch.{book._owner(dead.pid)}.abc.running.ipynb"  # another page's: not this run's business
    elsewhere = tmp_path / f".pacs.{dead.pid}@another-machine.abc.running.ipynb"
    for f in (orphan, live, other, elsewhere):
        f.write_text("{}")
    book.execute_notebook("pacs", "smoke", {"target": "sketch"}, output=tmp_path / "pacs.ipynb", progress=False)
    assert not orphan.exists() and live.exists() and other.exists() and elsewhere.exists()


def test_sigterm_keeps_the_page_as_far_as_it_ran_and_says_where(fake_papermill, monkeypatch, tmp_path, capsys):
    """SIGTERM stops `run` as Ctrl-C does: one line (exit 130), the page kept as <page>.failed.ipynb
    and named; a later success removes it; the process's own SIGTERM handler is back afterwards."""
    monkeypatch.setattr(book, "executed_path", lambda name, scale: tmp_path / f"{name}.ipynb")
    before = signal.getsignal(signal.SIGTERM)
    assert cli.main(["run", "pacs", "--scale", "smoke", "-p", "epochs", "9"]) == 130
    captured = capsys.readouterr()
    assert captured.err == "python -m calibook run: interrupted\n"
    assert f"the page as far as it ran: {tmp_path / 'pacs.failed.ipynb'}" in captured.out
    assert '"epochs": 9' in (tmp_path / "pacs.failed.ipynb").read_text()
    assert signal.getsignal(signal.SIGTERM) is before
    assert cli.main(["run", "pacs", "--scale", "smoke"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pacs.ipynb"]


def test_cli_prints_a_failing_cell_as_one_message(fake_papermill, monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setattr(book, "executed_path", lambda name, scale: tmp_path / f"{name}.ipynb")
    assert cli.main(["run", "pacs", "--scale", "smoke", "-p", "epochs", "7"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        "python -m calibook run: error: a cell of the notebook raised RuntimeError: CUDA out of memory"
    )
    assert "Traceback" not in err and not (tmp_path / "pacs.ipynb").exists()


def test_kernels_run_without_progress_bars_in_the_page(fake_papermill, tmp_path, capsys) -> None:
    """Third-party bars are off in the kernel; lib's own line goes to the terminal only, after the
    page and its place in the list, beside papermill's bar of cells labelled the same; with
    progress=False nothing is drawn."""
    before = os.environ.get("TQDM_DISABLE")
    book.execute_notebook("pacs", "smoke", output=tmp_path / "p.ipynb", place="2/5")
    quiet = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    assert fake_papermill[0]["env"] == {**quiet, progress.MODE: "terminal", progress.PREFIX: "[2/5 pacs] "}
    assert fake_papermill[0]["progress_bar"] == {"desc": "2/5 pacs", "disable": False}
    assert os.environ.get("TQDM_DISABLE") == before and progress.PREFIX not in os.environ  # restored
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "[calibook] 2/5 pacs (smoke): running" and out[1].startswith("[calibook] 2/5 pacs (smoke) ran in ")
    book.execute_notebook("pacs", "smoke", output=tmp_path / "p.ipynb", progress=False)
    assert fake_papermill[1]["env"] == {**quiet, progress.MODE: "off", progress.PREFIX: None}
    assert fake_papermill[1]["progress_bar"] is False


def test_the_book_runs_its_pages_in_order_and_ends_with_a_table_of_their_times(monkeypatch, capsys) -> None:
    clock = [0.0]
    seen = []

    def fake_execute(name, scale, params, output, place=""):
        seen.append((name, scale, place))
        clock[0] += {"a": 42.0, "b": 3725.0, "c": 5.0}[name]
        if name == "c":
            raise PapermillExecutionError(1, 1, "src", "ValueError", "bad", [])
        return Path(f"{name}.ipynb")

    monkeypatch.setattr(book, "check_notebook", lambda name: Path(name))
    monkeypatch.setattr(book, "copies", lambda name: [(name, {})])
    monkeypatch.setattr(book, "execute_notebook", fake_execute)
    monkeypatch.setattr(book.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(book, "paper_builds", lambda scale: [])
    assert book.execute_all("cpu", ["a", "b"]) == [Path("a.ipynb"), Path("b.ipynb")]
    assert seen == [("a", "cpu", "1/2"), ("b", "cpu", "2/2")]
    assert capsys.readouterr().out.splitlines() == [
        "[calibook] pages at cpu scale:",
        "  a          42s  ran",
        "  b        1h02m  ran",
        "  total    1h02m",
    ]
    with pytest.raises(PapermillExecutionError):  # a failing page: the table still comes, and says so
        book.execute_all("cpu", ["a", "c", "b"])
    assert capsys.readouterr().out.splitlines() == [
        "[calibook] pages at cpu scale:",
        "  a          42s  ran",
        "  c           5s  failed",
        "  total      47s",
        "  (1 of 3 pages not run)",
    ]


def test_below_paper_scale_pages_with_published_runs_also_run_at_paper_scale(monkeypatch, tmp_path, capsys) -> None:
    """The ledger's paper-scale column reads paper-scale copies of the pages: a cpu build makes them
    for the pages with runs in results/ (after its own pages) and removes a stale copy of a page
    without runs; a paper-scale build runs each page once. A page's copies with other parameters
    (PACS's other targets, :func:`calibook.pages.copies`) run after it, into their own files."""
    seen = []
    stale, stale_copy, kept = (tmp_path / "paper" / f"{n}.ipynb" for n in ("a", "a-x", "b"))
    for f in (stale, stale_copy, kept):
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("{}")

    def execute(name, scale, params, output, place=""):
        seen.append((name, scale, params, output.stem, place))

    monkeypatch.setattr(book, "check_notebook", lambda name: Path(name))
    monkeypatch.setattr(book, "copies", lambda name: [(name, {}), (f"{name}-x", {"target": "x"})])
    monkeypatch.setattr(book, "executed_path", lambda name, scale: tmp_path / scale / f"{name}.ipynb")
    monkeypatch.setattr(book, "execute_notebook", execute)
    monkeypatch.setattr(book, "paper_builds", lambda scale: ["b", "z"])  # z: queued, not asked for
    book.execute_all("cpu", ["a", "b"])
    assert seen == [
        ("a", "cpu", {}, "a", "1/6"),
        ("a", "cpu", {"target": "x"}, "a-x", "2/6"),
        ("b", "cpu", {}, "b", "3/6"),
        ("b", "cpu", {"target": "x"}, "b-x", "4/6"),
        ("b", "paper", {}, "b", "5/6"),
        ("b", "paper", {"target": "x"}, "b-x", "6/6"),
    ]
    assert not stale.exists() and not stale_copy.exists() and kept.exists()
    out = capsys.readouterr().out
    assert "  b (paper)" in out and "  b-x (paper)" in out
    seen.clear()
    book.execute_all("paper", ["a", "b"])
    assert [(name, at, place) for name, at, _, _, place in seen] == [
        ("a", "paper", "1/4"),
        ("a", "paper", "2/4"),
        ("b", "paper", "3/4"),
        ("b", "paper", "4/4"),
    ]


def test_a_page_with_targets_is_copied_once_per_other_target() -> None:
    """PACS's default target (photo) is its page; the book copies it for art, cartoon and sketch."""
    assert calibook.pages.copies("pacs") == [
        ("pacs", {}),
        ("pacs-art_painting", {"target": "art_painting"}),
        ("pacs-cartoon", {"target": "cartoon"}),
        ("pacs-sketch", {"target": "sketch"}),
    ]
    assert calibook.pages.copies("cifar10h") == [("cifar10h", {})]
    assert calibook.pages.page_of("pacs-sketch") == "pacs" and calibook.pages.page_of("pacs") == "pacs"


def test_paper_builds_are_the_queued_pages_with_published_runs(monkeypatch) -> None:
    import calibook.results

    monkeypatch.setattr(calibook.results, "PAGES", ("cifar10h", "sensitivity", "pacs"))
    monkeypatch.setattr(calibook.results, "published", lambda name: {"x": {}} if name != "sensitivity" else {})
    assert book.paper_builds("smoke") == ["cifar10h", "pacs"]


def test_a_cpu_build_also_runs_the_pages_whose_paper_scale_needs_no_gpu(monkeypatch) -> None:
    """Paper scale on a CPU: the released-logit pages, the closed forms and the Gaussian mixture, after
    the queued pages with runs; the GPU pages and the performance page (timings of this machine) never."""
    import calibook.results

    monkeypatch.setattr(calibook.results, "published", lambda name: {"x": {}} if name == "cifar10h" else {})
    on_cpu = [
        "routing_theory", "l2d_gaussians", "calibration", "cascading", "same_size", "cleaning",
        "losses_released_logits", "cross_paper",
    ]  # fmt: skip
    assert book.paper_builds("cpu") == ["cifar10h", *on_cpu]
    assert book.paper_builds("smoke") == ["cifar10h"]  # a smoke build stays quick


def _run_in_a_kernel(tmp_path, code: str, extra: dict[str, str] | None = None) -> list:
    """The outputs of one code cell run by papermill in a real kernel, in calibook.book's kernel environment."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(code)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    source, out = tmp_path / "t.ipynb", tmp_path / "o.ipynb"
    nbformat.write(nb, str(source))
    with mock.patch.dict(os.environ, {**book.QUIET_KERNEL_ENV, **(extra or {})}):
        papermill.execute_notebook(
            str(source), str(out), kernel_name="python3", progress_bar=False, cwd=str(repo_root())
        )
    return nbformat.read(str(out), as_version=4).cells[0].outputs


def test_a_real_kernel_prints_no_progress_bar(tmp_path) -> None:
    """tqdm in a page run by calibook.book (the kernel inherits TQDM_DISABLE) writes nothing."""
    outputs = _run_in_a_kernel(
        tmp_path,
        "import lib  # as every page does (it filters tqdm's IProgress warning)\n"
        "from tqdm.auto import tqdm\nfor _ in tqdm(range(3), desc='decoding'):\n    pass\nprint('done')",
    )
    assert [o.get("text") for o in outputs] == ["done\n"]


def test_used_in_index_is_generated_from_the_pages_code() -> None:
    index = book.used_in_index(["pacs", "calibration"])
    lines = index.splitlines()
    assert lines[0].startswith("| `lib` function")
    row = next(line for line in lines if "`lib.moe.pages.pacs.pacs_backbone`" in line)
    assert "[pacs](../notebooks/pacs.ipynb)" in row and "calibration" not in row
    refs = set(book.lib_references(repo_root() / "notebooks" / "pacs.ipynb"))
    assert {line.split("`")[1] for line in lines[2:] if "pacs.ipynb" in line} == refs


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("calibration", {"seed": "-1"}, "seed: must be >= 0"),
        ("calibration", {"n_bins": -4}, "n_bins: must be >= 0"),
        ("cascading", {"n_splits": "-1"}, "n_splits: must be >= 0"),
        ("l2d_gaussians", {"seeds": "-2"}, "seeds: must be >= 0"),
        ("cleaning", {"noise_rate": float("nan")}, "noise_rate: must be a finite number"),
        ("cleaning", {"noise_rate": "nan"}, "noise_rate: expected float"),
        ("cleaning", {"noise_rate": 1.5}, "noise_rate: must be a fraction in"),
        ("losses_cifar10", {"coverage": float("inf")}, "coverage: must be a finite number"),
        ("losses_released_logits", {"n_bins": 0}, r"n_bins: must be > 0 \(the notebook's default is 15\)"),
        ("pacs", {"train": "maybe"}, "train: unknown value 'maybe'"),
    ],
)
def test_parameter_values_are_checked(name, params, message) -> None:
    """The rules every way of running a page applies (python -m calibook run here, lib.page in a notebook)."""
    with pytest.raises(ValueError, match=message):
        notebooks.check_parameters(name, "smoke", params)


def test_good_values_pass_unchanged() -> None:
    assert notebooks.check_parameters("cleaning", "smoke", {"noise_rate": 0.0, "n_bins": 10}) == {
        "noise_rate": 0.0,
        "n_bins": 10,
    }
    assert notebooks.check_parameters("losses_released_logits", "smoke", {"n_bins": "20"}) == {"n_bins": 20}
    assert notebooks.check_parameters("pacs", "smoke", {"train": "no", "epochs": 0}) == {"train": "no", "epochs": 0}


def test_a_real_kernel_sends_the_pages_progress_line_to_the_terminal_not_the_page(tmp_path, capfd, monkeypatch) -> None:
    """The kernel's lib.engine.progress line (terminal mode, as calibook.book runs kernels) reaches the
    standard error the kernel inherited -- the terminal that runs the book -- after the runner's
    prefix, and the saved page holds only the cell's own output. (ipykernel keeps the original
    standard error only outside pytest: it reads PYTEST_CURRENT_TEST, which the kernel would inherit.)"""
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)
    code = "from lib.engine import progress\nwith progress.session('probe grid', 4, runs=2) as line:\n"
    outputs = _run_in_a_kernel(
        tmp_path, code + "    line.update(4, runs=2)\nprint('done')", {progress.PREFIX: "[1/1 t] "}
    )
    assert [o.get("text") for o in outputs] == ["done\n"]
    assert "[1/1 t] probe grid: epoch 4/4, 2/2 runs, " in capfd.readouterr().err


def test_the_scales_table_says_what_made_each_pages_numbers_and_its_paper_scale_verdicts(
    monkeypatch, tmp_path, executed_notebook
) -> None:
    def executed(name: str, scale: str, values: dict) -> None:
        executed_notebook(tmp_path / scale / f"{name}.ipynb", values)

    monkeypatch.setattr(book, "executed_path", lambda name, scale: tmp_path / scale / f"{name}.ipynb")
    executed("gauss", "cpu", {"scale_summary": "cpu: MLP, 5 seeds"})
    executed("gauss", "paper", {"scale_summary": "paper: MLP, 10 seeds"})
    executed("moe", "cpu", {"scale_summary": "cpu: frozen features", "paper_scale_runs": 8})
    executed("moe", "paper", {"scale_summary": "paper: ResNet-18, 5 seeds"})
    executed("pacs", "cpu", {"scale_summary": "cpu: PACS", "paper_scale_runs": 0})
    rows = book._scales_table("cpu", ["gauss", "moe", "pacs", "perf"]).splitlines()[2:]
    assert [r.split(" | ", 1)[1] for r in rows] == [
        "cpu: MLP, 5 seeds | MLP, 10 seeds |",
        "cpu: frozen features | ResNet-18, 5 seeds; 8 GPU runs published |",
        "cpu: PACS | 0 GPU runs published |",
        "not executed in this build |  |",
    ]
    assert book._scales_table("paper", ["gauss"]).splitlines()[2].endswith("| paper: MLP, 10 seeds |  |")


def test_the_settings_table_shows_what_differs_between_scales_then_what_is_alike(monkeypatch) -> None:
    """``book/scales.md``'s settings per page: the settings that differ by scale as rows (a setting a
    scale lacks shown as "—"), the rest in one sentence; a page without settings gets nothing."""
    import lib.config

    toml = {
        "toy": {
            "common": {"lam": 2.0, "methods": ["a", "b"], "epochs": 50},
            "smoke": {"epochs": 1, "augment": True, "seeds": [0]},
            "cpu": {"augment": False, "seeds": [0]},
            "paper": {"augment": True, "seeds": [0, 1, 2], "stack": 0},
        }
    }
    monkeypatch.setattr(lib.config, "_table", lambda: toml)
    assert book.settings_table(["toy", "other"]).splitlines() == [
        "### [toy](../notebooks/toy.ipynb)",
        "",
        "| setting | smoke | cpu | paper |",
        "|---|---|---|---|",
        "| `epochs` | 1 | 50 | 50 |",
        "| `augment` | true | false | true |",
        "| `seeds` | 0 | 0 | 0, 1, 2 |",
        "| `stack` | — | — | 0 |",
        "",
        "At every scale: `lam` = 2.0; `methods` = a, b.",
    ]


def test_a_run_with_a_copys_parameters_writes_that_copy(fake_papermill, monkeypatch, tmp_path) -> None:
    """``python -m calibook run pacs -p target sketch`` replaces the book's sketch page, not its photo
    page; other parameters write the page itself."""
    monkeypatch.setattr(book, "executed_path", lambda name, scale: tmp_path / scale / f"{name}.ipynb")
    assert book.execute_notebook("pacs", "smoke", {"target": "sketch"}, progress=False).name == "pacs-sketch.ipynb"
    assert book.execute_notebook("pacs", "smoke", {"target": "Art"}, progress=False).name == "pacs-art_painting.ipynb"
    assert book.execute_notebook("pacs", "smoke", {"target": "photo"}, progress=False).name == "pacs.ipynb"
    assert book.execute_notebook("pacs", "smoke", {"epochs": "2"}, progress=False).name == "pacs.ipynb"


def test_only_the_copies_a_build_made_are_staged_under_their_page(monkeypatch, tmp_path, executed_notebook) -> None:
    """A copy the build ran (b-x) becomes a section of its page in the staged table of contents, titled
    by its page and parameters, and joins the pages the ledger reads; one it did not run (b-y) does not.
    Then the page's view of all its copies (PACS's Table 2 whole) is a last section, made from what
    each copy published; a page with one copy (a) gets none."""
    site = tmp_path / "site"
    (site / "notebooks").mkdir(parents=True)
    (site / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nchapters:\n- file: notebooks/a\n- file: notebooks/b\n"
    )
    executed_notebook(site / "notebooks" / "a.ipynb", {"target": "-"})
    executed_notebook(site / "notebooks" / "b.ipynb", {"target": "w"})
    executed_notebook(tmp_path / "b-x.ipynb", {"target": "x"})
    monkeypatch.setattr(book, "executed_path", lambda name, scale: tmp_path / f"{name}.ipynb")
    monkeypatch.setattr(book, "copies", lambda n: [(n, {})] + [(f"{n}-{t}", {"target": t}) for t in "xy"] * (n == "b"))
    whole = lambda published: "# Bee, all\n" + " ".join(p["target"] for p in published)  # noqa: E731
    monkeypatch.setattr(book, "get", lambda n: mock.Mock(title="Bee: a table", across_targets=whole))
    monkeypatch.setattr(book, "_stage_notebook", lambda path: None)
    assert book._stage_copies(site, "cpu", ["a", "b"]) == ["a", "b", "b-x"]
    chapters = yaml.safe_load((site / "_toc.yml").read_text())["chapters"]
    assert chapters == [
        {"file": "notebooks/a"},
        {
            "file": "notebooks/b",
            "sections": [{"file": "notebooks/b-x", "title": "Bee, target x"}, {"file": "notebooks/b-all"}],
        },
    ]
    assert (site / "notebooks" / "b-x.ipynb").exists() and not (site / "notebooks" / "b-y.ipynb").exists()
    assert (site / "notebooks" / "b-all.md").read_text() == "# Bee, all\nw x"
    assert not (site / "notebooks" / "a-all.md").exists()


def test_a_copy_runs_and_is_listed_by_its_name_in_the_book(fake_papermill, monkeypatch, tmp_path, capsys) -> None:
    """The ledger names PACS's other pages ``pacs-sketch``; ``run pacs-sketch`` is ``run pacs -p target
    sketch`` (other ``-p`` added), a name that is no copy is refused naming it, and ``list`` shows them."""
    monkeypatch.setattr(book, "executed_path", lambda name, scale: tmp_path / scale / f"{name}.ipynb")
    assert cli.main(["run", "pacs-sketch", "--scale", "smoke", "-p", "epochs", "2"]) == 0
    assert fake_papermill[0]["parameters"] == {"scale": "smoke", "target": "sketch", "epochs": 2}
    assert (tmp_path / "smoke" / "pacs-sketch.ipynb").exists()
    assert cli.main(["run", "pacs-mars", "--scale", "smoke"]) == 2
    assert "notebook: unknown value 'pacs-mars'" in capsys.readouterr().err
    assert cli.main(["list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[listed.index("pacs") + 3] == "pacs-sketch              = pacs -p target sketch"


def test_book_only_runs_a_copy_by_its_name_alone(monkeypatch, tmp_path) -> None:
    """``book --only pacs-sketch`` runs that copy (at paper scale too when PACS has published runs),
    not PACS's other targets, and leaves their paper-scale copies alone; a name that is neither a
    notebook nor a copy is refused naming it."""
    seen = []
    monkeypatch.setattr(book, "executed_path", lambda name, scale: tmp_path / scale / f"{name}.ipynb")
    monkeypatch.setattr(
        book, "execute_notebook", lambda name, at, params, out, place="": seen.append((name, at, params, out.stem))
    )
    for name in ("pacs", "cifar10h"):
        (tmp_path / "paper").mkdir(exist_ok=True)
        (tmp_path / "paper" / f"{name}.ipynb").write_text("{}")
    monkeypatch.setattr(book, "paper_builds", lambda scale: ["pacs"])
    book.execute_all("smoke", ["pacs-sketch", "cifar10h", "pacs-sketch"])  # a copy asked twice runs once
    assert seen == [
        ("pacs", "smoke", {"target": "sketch"}, "pacs-sketch"),
        ("cifar10h", "smoke", {}, "cifar10h"),
        ("pacs", "paper", {"target": "sketch"}, "pacs-sketch"),
    ]
    assert (tmp_path / "paper" / "pacs.ipynb").exists() and not (tmp_path / "paper" / "cifar10h.ipynb").exists()
    seen.clear()
    book.execute_all("smoke", ["pacs", "pacs-sketch"])  # the page's copies include pacs-sketch
    assert [out for _, at, _, out in seen if at == "smoke"] == [
        "pacs",
        "pacs-art_painting",
        "pacs-cartoon",
        "pacs-sketch",
    ]
    with pytest.raises(ValueError, match="notebook: unknown value 'pacs-mars'"):
        book.execute_all("smoke", ["pacs-mars"])
