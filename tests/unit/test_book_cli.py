"""lib.book and lib.cli: the notebook list comes from the table of contents; bad names are refused."""

import pytest

from lib import book, cli


def test_notebook_names_follow_the_toc() -> None:
    names = book.notebook_names()
    assert names[:2] == ["routing_theory", "cifar10h"]
    assert "pacs" in names and len(names) == len(set(names))


def test_unknown_notebook_and_scale_are_refused() -> None:
    with pytest.raises(ValueError, match="notebook: unknown value 'pacz'.*'pacs'"):
        book.check_notebook("pacz")
    with pytest.raises(ValueError, match="scale: unknown value"):
        book.execute_notebook("pacs", scale="huge")


def test_cli_parses_literal_parameters() -> None:
    assert cli._literal("3") == 3 and cli._literal("0.5") == 0.5
    assert cli._literal("sketch") == "sketch" and cli._literal("[1, 2]") == [1, 2]
    with pytest.raises(SystemExit):
        cli.main(["run", "pacs", "--scale", "huge"])
