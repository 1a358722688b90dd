"""lib.data.locate: search order and the message when nothing is found."""

import pytest

from lib.data import locate as loc


@pytest.fixture()
def roots(tmp_path, monkeypatch):
    env_root, shared, cache = tmp_path / "env", tmp_path / "shared", tmp_path / "cache"
    monkeypatch.setenv(loc.DATA_ENV, str(env_root))
    monkeypatch.setattr(loc, "shared_data_dir", lambda: shared)
    monkeypatch.setattr(loc, "local_data_cache", lambda: cache)
    return env_root, shared, cache


def test_order_explicit_env_shared_cache(tmp_path, roots) -> None:
    env_root, shared, cache = roots
    for root in (cache, shared, env_root):
        (root / "ds").mkdir(parents=True)
        assert loc.locate("ds", "ds") == root / "ds"
    explicit = tmp_path / "mine"
    (explicit / "ds").mkdir(parents=True)
    assert loc.locate("ds", "ds", explicit=explicit) == explicit / "ds"
    assert loc.locate("ds", "ds", explicit=explicit / "ds") == explicit / "ds"


def test_missing_names_dataset_places_and_how_to_get_it(roots, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(loc.DataNotFoundError) as err:
        loc.locate("civilcomments", "civilcomments", download=lambda d: d, how_to_get="run X")
    text = str(err.value)
    assert "'civilcomments' not found" in text and "$CALIBOOK_DATA" in text
    assert "../shared/data" in text and "local cache" in text
    assert "download skipped" in text and "How to get it: run X" in text


def test_download_is_used_when_online_and_failure_reported(roots, monkeypatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    _, _, cache = roots
    assert loc.locate("ds", "ds", download=lambda d: d / "ds") == cache / "ds"

    def broken(_):
        raise ConnectionError("no route to host")

    with pytest.raises(loc.DataNotFoundError, match="download failed: ConnectionError: no route"):
        loc.locate("ds", "other", download=broken)
