"""Tests of calibook.artifacts: the SHA-256 is the hash of the file's bytes, a write is all or
nothing, and an artifact is read only where its bytes match the record (committed copy first, then
the cache), a damaged copy being warned about and skipped."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from calibook import artifacts as art


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("CALIBOOK_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "cache"))
    return tmp_path


def test_sha256_file_is_the_hash_of_the_bytes(tmp_path) -> None:
    data = bytes(range(256)) * 5000  # over one 1 MiB read block
    (tmp_path / "f").write_bytes(data)
    assert art.sha256_file(tmp_path / "f") == hashlib.sha256(data).hexdigest()


def test_atomic_write_is_all_or_nothing(tmp_path) -> None:
    path = tmp_path / "sub" / "x.txt"
    art.atomic_write(path, lambda tmp: tmp.write_text("first"))
    assert path.read_text() == "first"

    def failing(tmp):
        tmp.write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError):
        art.atomic_write(path, failing)
    assert path.read_text() == "first"  # the old file, whole
    assert sorted(p.name for p in path.parent.iterdir()) == ["x.txt"]  # no temporary left behind


def _record(dirs, key="k1", group="g", code="abc", checksum="c1"):
    """A finished record with one artifact 'pred', saved in the cache; returns (record, arrays)."""
    arrays = {"p": np.arange(6.0).reshape(2, 3)}
    folder = dirs / "cache" / "runs" / group / art.cache_folder(key, code)
    folder.mkdir(parents=True)
    art.savez(folder / "pred.npz", arrays)
    rec = {
        "group": group,
        "key": key,
        "code_fingerprint": code,
        "checksum": checksum,
        "artifacts": {"pred": {"sha256": art.sha256_file(folder / "pred.npz"), "file": "pred.npz"}},
    }
    return rec, arrays, folder


def test_cache_folder_name() -> None:
    assert art.cache_folder("k", "") == "k" and art.cache_folder("k", "f00") == "k.f00"


def test_load_from_the_cache_and_a_committed_copy_first(dirs) -> None:
    rec, arrays, folder = _record(dirs)
    got = art.load_artifact(rec, "pred")
    assert np.array_equal(got["p"], arrays["p"])
    assert not art.is_committed(rec)
    # the same record committed under results/<page>/<group>/ with its artifact beside it
    committed = dirs / "results" / "page" / "g"
    committed.mkdir(parents=True)
    (committed / "k1.json").write_text(json.dumps({"checksum": "c1"}))
    (committed / "k1.pred.npz").write_bytes((folder / "pred.npz").read_bytes())
    assert art.is_committed(rec)
    assert art.artifact_paths(rec, "pred")[0] == committed / "k1.pred.npz"
    (folder / "pred.npz").unlink()  # the cache copy gone: the committed one still serves
    assert np.array_equal(art.load_artifact(rec, "pred")["p"], arrays["p"])
    # a committed record with another checksum is another record: neither committed nor searched
    other = {**rec, "checksum": "c2"}
    assert not art.is_committed(other) and len(art.artifact_paths(other, "pred")) == 1


def test_a_damaged_copy_is_warned_about_and_never_read(dirs) -> None:
    rec, _, folder = _record(dirs)
    data = (folder / "pred.npz").read_bytes()
    (folder / "pred.npz").write_bytes(data[: len(data) // 2])  # truncated
    with pytest.warns(art.CorruptEntryWarning, match="SHA-256"):
        assert art.damaged_artifact(rec, committed_only=False, cached_dir=folder) == "pred"
    with pytest.warns(art.CorruptEntryWarning), pytest.raises(FileNotFoundError, match="pred"):
        art.load_artifact(rec, "pred")
    (folder / "pred.npz").unlink()
    with pytest.warns(art.CorruptEntryWarning, match="missing"):
        assert art.damaged_artifact(rec, committed_only=False, cached_dir=folder) == "pred"


def test_sound_artifacts_are_not_damaged_and_bad_arguments_are_named(dirs) -> None:
    rec, _, folder = _record(dirs)
    assert art.damaged_artifact(rec, committed_only=False, cached_dir=folder) is None
    with pytest.raises(ValueError, match="record"):
        art.load_artifact({"key": "k1"}, "pred")
    with pytest.raises(ValueError, match="name"):
        art.load_artifact(rec, "logits")
