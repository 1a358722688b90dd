"""Data that travels: a dataset's files as numbered chunks small enough for one transfer each.

A GPU machine receives only the working tree, at most 64 MiB per transfer, and not the data beside
it. ``python -m lib pack DATASET --max-mib 60`` writes the files a page needs (as found by
:mod:`lib.data.locate`: ``$CALIBOOK_DATA``, ``../shared/data``, the local cache) into one tar
stream cut into chunks ``.packs/<dataset>/part-NNN.bin`` with a ``manifest.json`` (SHA-256 of every
chunk and of the whole). :func:`unpack` joins and verifies the chunks and extracts them into the
local data cache, where every loader looks; the queue unpacks all complete packs before it runs.
The files are packed as they are (JPEG folders, zip, ``.npy``): already compressed, and smaller
than decoded arrays. See ``results/README.md`` for sending the chunks over consecutive transfers.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

from lib.config import repo_root
from lib.data.locate import candidate_roots, local_data_cache

#: pack name -> folders (relative to a data root) that its pages need.
PACKS: dict[str, tuple[str, ...]] = {
    "cifar10h": ("cifar10", "cifar10h"),
    "pacs": ("pacs",),
    "cifar10": ("cifar10",),
    "mmlu": ("mmlu-llama31",),
    "resnet50-logits": ("cifar10-resnet50-logits",),
}

__all__ = ["PACKS", "pack", "packs_dir", "unpack", "unpack_all"]


def packs_dir() -> Path:
    """``.packs/`` in the repository root (ignored by git; carried to a GPU machine explicitly)."""
    return repo_root() / ".packs"


def _find(folder: str) -> Path:
    for label, root in candidate_roots():
        if (root / folder).is_dir() and any((root / folder).iterdir()):
            return root / folder
    places = ", ".join(f"{label}: {root / folder}" for label, root in candidate_roots())
    raise FileNotFoundError(f"data folder {folder!r} not found (looked in {places}); see the book's data page")


def pack(name: str, max_mib: float = 60.0, out: Path | None = None) -> list[Path]:
    """Write pack ``name`` as chunks of at most ``max_mib`` MiB; returns the chunk and manifest paths."""
    if name not in PACKS:
        raise ValueError(f"name: unknown pack {name!r}; valid: {', '.join(PACKS)}")
    if not isinstance(max_mib, (int, float)) or not 0 < max_mib <= 1024:
        raise ValueError(f"max_mib: must lie in (0, 1024], got {max_mib!r}")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for folder in PACKS[name]:
            tar.add(_find(folder), arcname=folder)
    blob = buf.getvalue()
    dest = (out or packs_dir()) / name
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("part-*.bin"):
        old.unlink()
    size = int(max_mib * 2**20)
    parts = []
    for i in range(0, max(len(blob), 1), size):
        p = dest / f"part-{i // size:03d}.bin"
        p.write_bytes(blob[i:i + size])
        parts.append(p)
    manifest = {"name": name, "folders": list(PACKS[name]), "bytes": len(blob),
                "sha256": hashlib.sha256(blob).hexdigest(),
                "parts": [{"file": p.name, "sha256": hashlib.sha256(p.read_bytes()).hexdigest()} for p in parts]}
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return [*parts, dest / "manifest.json"]


def unpack(name: str, src: Path | None = None, dest: Path | None = None) -> Path:
    """Join and verify the chunks of pack ``name`` and extract them into the local data cache (or
    ``dest``); a missing or damaged chunk raises ``FileNotFoundError``/``ValueError`` naming it."""
    folder = (src or packs_dir()) / name
    mpath = folder / "manifest.json"
    if not mpath.exists():
        raise FileNotFoundError(f"{mpath} missing: pack {name!r} was not sent (python -m lib pack {name})")
    manifest = json.loads(mpath.read_text())
    blob = b""
    for part in manifest["parts"]:
        p = folder / part["file"]
        if not p.exists():
            raise FileNotFoundError(f"{p} missing: send every chunk of pack {name!r}")
        data = p.read_bytes()
        if hashlib.sha256(data).hexdigest() != part["sha256"]:
            raise ValueError(f"{p}: damaged chunk (SHA-256 differs from {mpath.name})")
        blob += data
    if hashlib.sha256(blob).hexdigest() != manifest["sha256"]:
        raise ValueError(f"pack {name!r}: the joined chunks do not match {mpath}")
    target = dest or local_data_cache()
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r") as tar:
        tar.extractall(target, filter="data")
    return target


def unpack_all(src: Path | None = None) -> list[str]:
    """Unpack every complete pack under ``.packs/`` whose folders are not in the data cache yet."""
    done = []
    root = src or packs_dir()
    for mpath in sorted(root.glob("*/manifest.json")):
        name = mpath.parent.name
        folders = json.loads(mpath.read_text())["folders"]
        if all((local_data_cache() / f).is_dir() for f in folders):
            continue
        unpack(name, root)
        done.append(name)
    return done
