"""calibook.gpu.packs: packs compressed and sized to the call budget, unpacked only when whole (a missing
chunk named), checked here before a call (64 MiB, whole packs); partial PACS and missing data are
refused with one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from calibook.gpu import packs
from lib.config import repo_root


def test_the_chunk_budget_leaves_room_for_the_tree_and_results(monkeypatch, tmp_path):
    monkeypatch.setenv("CALIBOOK_RESULTS", str(tmp_path / "results"))
    assert packs.chunk_budget_mib(tree=0) == packs.CALL_MIB - packs.MARGIN_MIB
    assert packs.chunk_budget_mib(tree=10 * 2**20) == 50.0  # 64 - 4 - 10
    with pytest.raises(ValueError, match="no room"):
        packs.chunk_budget_mib(tree=63 * 2**20)
    tree = packs.tree_bytes()
    assert 0 < tree < 64 * 2**20
    (tmp_path / "results" / "p" / "g").mkdir(parents=True)
    (tmp_path / "results" / "p" / "g" / "k.json").write_bytes(b"x" * 1000)
    assert packs.tree_bytes() == tree + 1000  # results/ elsewhere travels too
    with pytest.raises(ValueError, match="max_mib: must lie in"):  # a chunk that would not fit beside the tree
        packs.pack("cifar10h", max_mib=63.5, out=tmp_path / "out")


def _data(tmp_path, monkeypatch):
    data = tmp_path / "data"
    (data / "cifar10h").mkdir(parents=True)
    payload = np.random.default_rng(0).bytes(300_000)
    (data / "cifar10h" / "x.bin").write_bytes(payload)
    (data / "cifar10").mkdir()
    (data / "cifar10" / "y.txt").write_text("hello")
    monkeypatch.setenv("CALIBOOK_DATA", str(data))
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "cache"))
    return payload


def test_a_call_unpacks_a_whole_pack_once_and_names_the_chunks_it_lacks(tmp_path, monkeypatch):
    payload = _data(tmp_path, monkeypatch)
    parts = packs.pack("cifar10h", max_mib=0.1, out=tmp_path / "made")
    chunks = parts[:-1]
    assert len(chunks) >= 3  # random bytes do not compress
    lacking = tmp_path / "lacking"  # a call that carried only the first chunk and the manifest
    (lacking / "cifar10h").mkdir(parents=True)
    for f in (chunks[0], parts[-1]):
        (lacking / "cifar10h" / f.name).write_bytes(f.read_bytes())
    names = ", ".join(c.name for c in chunks[1:])
    with pytest.raises(ValueError, match=f"pack cifar10h lacks {names} .this call carried 1 of its {len(chunks)}"):
        packs.unpack_all(lacking)
    lines = packs.unpack_all(tmp_path / "made")
    assert len(lines) == 1 and "unpacked into the data cache" in lines[0]
    from lib.data.locate import local_data_cache

    assert (local_data_cache() / "cifar10h" / "x.bin").read_bytes() == payload
    assert "in the data cache already" in packs.unpack_all(tmp_path / "made")[0]  # a warm machine: once


def test_the_check_before_a_call_refuses_part_of_a_pack_and_more_than_a_call_carries(tmp_path, monkeypatch):
    """Sizes by hand: a tree of one 1000-byte file; the carried pack is its chunks and manifest."""
    _data(tmp_path, monkeypatch)
    monkeypatch.setenv("CALIBOOK_RESULTS", str(tmp_path / "tree" / "results"))
    tree = tmp_path / "tree"
    (tree / "a.txt").parent.mkdir(parents=True)
    (tree / "a.txt").write_bytes(b"x" * 1000)
    parts = packs.pack("cifar10h", max_mib=0.1, out=tree / ".packs")
    carried = sum(p.stat().st_size for p in parts)
    line = packs.check_carry([".packs/cifar10h"], tree)
    assert line == (
        f"carry: tree {1000 / 2**20:.1f} MiB + .packs/cifar10h {carried / 2**20:.1f} MiB = "
        f"{(1000 + carried) / 2**20:.1f} MiB of 64"
    )
    with pytest.raises(ValueError, match="pack cifar10h lacks part-001.bin"):
        packs.check_carry([".packs/cifar10h/manifest.json", ".packs/cifar10h/part-000.bin"], tree)
    with pytest.raises(ValueError, match="lacks manifest.json"):
        packs.check_carry([f".packs/cifar10h/{p.name}" for p in parts[:-1]], tree)
    with pytest.raises(ValueError, match="does not exist here"):
        packs.check_carry([".weights"], tree)
    (tree / "big.bin").write_bytes(b"\0" * (64 * 2**20 - 1000 - carried + 1))  # one byte over
    with pytest.raises(ValueError, match="of 64: the call would be refused"):
        packs.check_carry([".packs/cifar10h"], tree)


def test_partial_pacs_and_missing_data_are_refused(tmp_path, monkeypatch):
    data = tmp_path / "data"
    for d in ("photo", "art_painting", "cartoon"):  # no sketch; and one empty class folder
        for c in ("dog", "elephant", "giraffe", "guitar", "horse", "house", "person"):
            (data / "pacs" / d / c).mkdir(parents=True)
            if (d, c) != ("cartoon", "horse"):
                (data / "pacs" / d / c / "1.jpg").write_bytes(b"jpg")
    monkeypatch.setenv("CALIBOOK_DATA", str(data))
    with pytest.raises(ValueError, match="partial PACS: missing or empty cartoon/horse, sketch/dog"):
        packs.pack("pacs", max_mib=1, out=tmp_path / "out")
    assert not (tmp_path / "out").exists()
    env = {**os.environ, "PYTHONPATH": str(repo_root()), "CALIBOOK_DATA": str(data)}
    r = subprocess.run(
        [sys.executable, "-m", "calibook", "pack", "pacs", "--max-mib", "1"],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "partial PACS" in r.stderr


def test_a_missing_chunk_names_itself(tmp_path, monkeypatch):
    _data(tmp_path, monkeypatch)
    parts = packs.pack("cifar10h", max_mib=0.1, out=tmp_path / "made")
    parts[1].unlink()
    with pytest.raises(FileNotFoundError, match="part-001.bin missing"):
        packs.unpack("cifar10h", tmp_path / "made", dest=tmp_path / "x")
    assert json.loads(parts[-1].read_text())["name"] == "cifar10h"


def test_pack_round_trip_in_chunks(tmp_path, monkeypatch):
    """A pack splits into chunks of at most max_mib, unpacks to the same bytes, and a damaged chunk
    is named (moved here from test_queue, beside the other pack tests)."""
    payload = _data(tmp_path, monkeypatch)
    parts = packs.pack("cifar10h", max_mib=0.1, out=tmp_path / "packs")
    assert len(parts) >= 4 and all(p.stat().st_size <= 0.1 * 2**20 for p in parts[:-1])
    assert json.loads(parts[-1].read_text())["bytes"] > 300_000  # gzip adds a little to random bytes
    out = packs.unpack("cifar10h", tmp_path / "packs", dest=tmp_path / "back")
    assert (out / "cifar10h" / "x.bin").read_bytes() == payload and (out / "cifar10" / "y.txt").read_text() == "hello"
    parts[1].write_bytes(b"damaged")
    with pytest.raises(ValueError, match="damaged chunk"):
        packs.unpack("cifar10h", tmp_path / "packs", dest=tmp_path / "again")
    with pytest.raises(ValueError, match="^dataset: unknown pack 'nope'"):
        packs.pack("nope")


def test_a_pack_too_large_for_one_call_gathers_over_staged_calls_to_a_warm_machine(tmp_path, monkeypatch):
    """Staged calls: each carries what fits beside the tree (the manifest with the first chunk, the
    chunks in order, other paths such as weights last); a warm machine keeps what came, says what is
    still to come, and unpacks once whole; a cold one lacks the first calls' chunks and says which."""
    import shutil

    payload = _data(tmp_path, monkeypatch)
    tree = tmp_path / "tree"
    tree.mkdir()
    monkeypatch.setenv("CALIBOOK_RESULTS", str(tree / "results"))
    parts = packs.pack("cifar10h", max_mib=0.1, out=tree / ".packs")
    (tree / ".weights").mkdir()
    (tree / ".weights" / "w.pth").write_bytes(b"w" * 50_000)
    sizes = {p.name: p.stat().st_size for p in parts}
    room = 0.25  # MiB a call holds here: two chunks of 0.1 MiB, not three
    calls = packs.stages([".packs/cifar10h", ".weights"], tree, call_mib=room, margin_mib=0)
    flat = [p for c in calls for p in c]
    assert flat == [f".packs/cifar10h/{n}" for n in ["manifest.json", *(p.name for p in parts[:-1])]] + [".weights"]

    def size(rel):
        return sizes.get(rel.rsplit("/", 1)[-1], 50_000)

    for carry, after in zip(calls, [*calls[1:], None]):  # each call within the room, as full as the order allows
        assert sum(map(size, carry)) <= room * 2**20
        assert after is None or sum(map(size, carry)) + size(after[0]) > room * 2**20
    assert packs.stages([".packs/cifar10h"], tree) == [[f".packs/cifar10h/{p.name}" for p in [parts[-1], *parts[:-1]]]]
    with pytest.raises(ValueError, match="lacks"):  # part of a pack: refused unless staged
        packs.check_carry(calls[0], tree)
    assert "(staged: the chunks gather on the warm machine)" in packs.check_carry(calls[0], tree, staged=True)

    last_chunk = max(i for i, c in enumerate(calls) if any("/part-" in p for p in c))
    machine = tmp_path / "machine"
    for i, carry in enumerate(calls):  # the warm machine: what each call carried stays
        for rel in carry:
            src, dst = tree / rel, machine / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(src, dst) if src.is_dir() else shutil.copyfile(src, dst)
        line = packs.staged("cifar10h", machine / ".packs")
        assert line.endswith("; whole") == (i >= last_chunk), line
    assert "unpacked into the data cache" in packs.unpack_all(machine / ".packs")[0]
    from lib.data.locate import local_data_cache

    assert (local_data_cache() / "cifar10h" / "x.bin").read_bytes() == payload
    cold = tmp_path / "cold" / ".packs" / "cifar10h"  # a fresh machine: the manifest, then only the last chunks
    cold.mkdir(parents=True)
    for rel in [".packs/cifar10h/manifest.json", *(p for p in calls[last_chunk] if "/part-" in p)]:
        shutil.copyfile(tree / rel, cold / rel.rsplit("/", 1)[-1])
    assert "to come: part-000.bin" in packs.staged("cifar10h", cold.parent)
    with pytest.raises(ValueError, match="lacks part-000.bin"):
        packs.unpack_all(cold.parent)
