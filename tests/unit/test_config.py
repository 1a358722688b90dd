"""lib.config: scales, per-notebook settings and their errors."""

import pytest

from lib import config


def test_scales_are_the_three_documented_ones() -> None:
    from calibook.cli import DEFAULT_SCALE

    assert config.SCALES == ("smoke", "cpu", "paper")
    assert DEFAULT_SCALE == "cpu"


def test_unknown_scale_lists_valid_ones() -> None:
    with pytest.raises(ValueError, match=r"scale: unknown value 'gpu'.*'smoke', 'cpu', 'paper'"):
        config.settings("pacs", "gpu")


def test_unknown_notebook_lists_valid_ones() -> None:
    with pytest.raises(ValueError, match="notebook: unknown value 'nope'.*'pacs'"):
        config.settings("nope", "cpu")


def test_scale_overrides_common_and_overrides_are_checked(tmp_path, monkeypatch) -> None:
    toml = tmp_path / "scales.toml"
    toml.write_text("[demo.common]\nepochs = 5\nlr = 0.1\n[demo.smoke]\nepochs = 1\n[demo.cpu]\n[demo.paper]\n")
    monkeypatch.setattr(config, "SCALES_FILE", toml)
    config._table.cache_clear()
    try:
        assert config.settings("demo", "smoke") == {"epochs": 1, "lr": 0.1, "scale": "smoke"}
        assert config.settings("demo", "cpu", epochs=3, lr=None)["epochs"] == 3
        with pytest.raises(ValueError, match="demo setting: unknown value 'epoch'"):
            config.settings("demo", "cpu", epoch=3)
    finally:
        config._table.cache_clear()


def test_build_dir_rejects_unknown_scale() -> None:
    from calibook.book import build_dir

    with pytest.raises(ValueError, match="scale"):
        build_dir("huge")


def test_the_sensitivity_page_trains_on_the_cifar10h_pages_cpu_activations() -> None:
    """Both pages' cpu scale start from the same frozen network on the same images, so the cached
    activations of one serve the other (lib.features.cifar_features keys them by the images)."""
    a, b = config.settings("cifar10h", "cpu"), config.settings("sensitivity", "cpu")
    for key in ("data", "backbone", "pretrained", "features", "image_size", "n_train", "n_test", "augment"):
        assert a[key] == b[key], key
    assert a["features"] and a["backbone"] == f"tail:efficientnet_lite0:{a['image_size']}"
    assert not any(config.settings(p, "paper")["features"] for p in ("cifar10h", "sensitivity"))


def test_paper_numbers_are_read_from_each_papers_file_and_a_bad_name_is_refused() -> None:
    """Each paper's numbers file parses; a number the paper prints reads back as printed (paper 3's
    matrix-factorisation router, APGR 0.5497); an unknown paper is a one-line error naming it."""
    import pytest

    from lib.config import paper_numbers

    assert {p: isinstance(paper_numbers(p), dict) for p in ("moe", "l2d", "ccc", "rr")} == dict.fromkeys(
        ("moe", "l2d", "ccc", "rr"), True
    )
    assert paper_numbers("ccc")["cascading"]["apgr_mf_router"] == 0.5497
    paper_numbers("ccc")["cascading"]["apgr_mf_router"] = 0.0  # a caller's edit stays its own
    assert paper_numbers("ccc")["cascading"]["apgr_mf_router"] == 0.5497
    with pytest.raises(ValueError, match="^paper"):
        paper_numbers("nope")


def test_an_entry_with_a_base_takes_its_tables_between_its_own() -> None:
    """The sensitivity page runs on the CIFAR-10H page's setup (``base``): its own common table, then
    CIFAR-10H's table of the scale, then its own scale's, which wins; ``base`` itself is no setting."""
    import tomllib

    table = tomllib.loads(config.SCALES_FILE.read_text())
    assert table["sensitivity"]["common"]["base"] == "cifar10h"
    for scale in config.SCALES:
        got = config.settings("sensitivity", scale)
        assert "base" not in got and got["method"] == "robust"  # its common table
        for key, value in table["cifar10h"][scale].items():
            assert got[key] == table["sensitivity"][scale].get(key, value), (scale, key)
    assert config.settings("sensitivity", "cpu")["filtered_copies"] == 0  # its own, over CIFAR-10H's 1
    assert config.settings("sensitivity", "cpu")["batch_size"] == 64  # CIFAR-10H's cpu, over its common 128
