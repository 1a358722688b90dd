"""calibook.page: every way of running a page checks its parameters; an unfinished run says so; what a page publishes is glued for the book to read."""

from __future__ import annotations

import nbformat
import papermill
import pytest
from papermill.exceptions import PapermillExecutionError

from calibook import page
from lib import report
from lib.config import repo_root


def _notebook(path, middle: str = "x = 1"):
    """A page like notebooks/calibration (same parameters) with the first and last cells of every page."""
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('scale: str = "cpu"\nseed: int = 0\nn_bins: int = 0')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [
        params,
        nbformat.v4.new_code_cell('from calibook import page\npage.start("calibration", globals())'),
        nbformat.v4.new_code_cell(middle),
        nbformat.v4.new_code_cell('page.finish("calibration")'),
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(path))
    return path


def _run(tmp_path, middle="x = 1", **parameters):
    out = tmp_path / "out.ipynb"
    try:
        papermill.execute_notebook(
            str(_notebook(tmp_path / "in.ipynb", middle)),
            str(out),
            parameters=parameters,
            cwd=str(repo_root()),
            progress_bar=False,
            kernel_name="python3",
        )
        error = None
    except PapermillExecutionError as err:
        error = err
    return nbformat.read(str(out), as_version=4), error


def _notice(nb) -> str:
    first = next(c for c in nb.cells if "page.start" in c.source)
    return "".join(o.get("data", {}).get("text/markdown", "") for o in first.outputs)


def test_injected_names_are_read_from_papermills_cell():
    ns = {"In": ["", '# Parameters\nsede = 3\nscale = "smoke"\n', "import x"]}
    assert page.injected_names(ns) == ["sede", "scale"] and page.injected_names({}) == []


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"sede": 3}, "sede: not a parameter of notebook 'calibration'.*did you mean 'seed'"),
        ({"seed": -1}, "seed: must be >= 0"),
        ({"n_bins": -4}, "n_bins: must be >= 0"),
        ({"n_bins": float("nan")}, "n_bins: expected int"),
        ({"n_bins": 1}, "n_bins: must be at least 2"),
        ({"scale": "huge"}, "scale: unknown value"),
    ],
)
def test_start_refuses_bad_parameters_in_the_namespace(params, message):
    ns = {"scale": "smoke", "seed": 0, "n_bins": 0, **params}
    ns["In"] = ["", "# Parameters\n" + "".join(f"{k} = {v!r}\n" for k, v in params.items())]
    with pytest.raises(ValueError, match=message):
        page.start("calibration", ns)


def test_raw_strings_papermill_injects_reach_the_page_as_checked_values():
    """``papermill -r seed 3`` injects the string '3': the page continues with the int 3."""
    ns = {"scale": "smoke", "seed": "3", "n_bins": "0", "In": ["", "# Parameters\nseed = '3'\nn_bins = '0'\n"]}
    page.start("calibration", ns)
    assert ns["seed"] == 3 and ns["n_bins"] == 0 and isinstance(ns["seed"], int)


def test_a_misspelled_pacs_target_stops_the_page_before_anything_runs():
    ns = {"scale": "smoke", "target": "skecth", "epochs": 0, "train": "auto"}
    ns["In"] = ["", "# Parameters\ntarget = 'skecth'\n"]
    with pytest.raises(ValueError, match="target: unknown PACS domain 'skecth'"):
        page.start("pacs", ns)
    page.start("pacs", {**ns, "target": "art"})  # the alias is a domain


def test_bad_parameter_through_papermill_stops_in_the_first_code_cell(tmp_path):
    nb, error = _run(tmp_path, sede=3, scale="smoke")
    assert error is not None and error.ename == "ValueError" and "sede" in error.evalue
    assert "did not finish" not in _notice(nb)  # refused before the notice: nothing ran


def test_an_interrupted_page_says_so_and_a_finished_one_does_not(tmp_path):
    nb, error = _run(tmp_path, middle="raise RuntimeError('interrupted')", scale="smoke", seed=2)
    assert error is not None and "did not finish running" in _notice(nb)
    assert "python -m calibook run calibration --scale smoke -p seed 2`" in _notice(nb)  # this run's command
    nb, error = _run(tmp_path, scale="smoke", seed=2)
    assert error is None and _notice(nb) == ""
    first = next(c for c in nb.cells if "page.start" in c.source)
    assert [o.output_type for o in first.outputs] == ["display_data"]  # the (emptied) notice alone


def test_image_data_loads_the_scales_images_and_refuses_a_target():
    from lib.config import settings

    cfg = settings("losses_cifar10", "smoke")
    from calibook.pages import get

    data = get("losses_cifar10").data(cfg)
    n = cfg["n_train"]
    assert data["train_x"].shape[0] == n and data["train_x"].dtype.is_floating_point is False
    assert data["num_classes"] == 10
    with pytest.raises(ValueError, match="target: losses_cifar10 has no target 'sketch'"):
        get("losses_cifar10").data(cfg, "sketch")


def test_publish_values_and_claims_glue_what_the_book_reads(monkeypatch) -> None:
    """Each keyword is glued under its name; a claims table is glued as its rows and shown; anything else
    as claims is a one-line error naming the argument."""
    import myst_nb

    glued, shown = [], []
    monkeypatch.setattr(myst_nb, "glue", lambda name, value, display=False: glued.append((name, value, display)))
    monkeypatch.setattr(page, "show", shown.append)
    page.publish_values(a=1, b=[0.5, "x"])
    table = report.claims_table([report.claim_row("c", "p", "o", report.verdict(True))])
    page.publish_claims(table)
    assert glued[:2] == [("a", 1, False), ("b", [0.5, "x"], False)]
    assert glued[2][0] == "claims" and glued[2][1] == table.to_dict("records") and len(shown) == 1
    assert (
        list(shown[0].columns) == [*table.columns[:-1], "the paper's own"]
        and shown[0].values.tolist() == table.values.tolist()
    )
    with pytest.raises(ValueError, match="claims"):
        page.publish_claims([{"claim": "c"}])
