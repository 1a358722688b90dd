"""Data that travels: a dataset's files as numbered chunks small enough for one transfer each.

A GPU machine receives only the working tree, at most 64 MiB per transfer, and not the data beside
it. ``python -m lib pack DATASET`` writes the files a page needs (as found by
:mod:`lib.data.locate`: ``$CALIBOOK_DATA``, ``../shared/data``, the local cache) into one tar
stream cut into chunks ``.packs/<dataset>/part-NNN.bin`` with a ``manifest.json`` (SHA-256 of every
chunk and of the whole). :func:`unpack` joins and verifies the chunks and extracts them into the
local data cache, where every loader looks; the queue unpacks all complete packs before it runs.
The files are packed as they are (JPEG folders, zip, ``.npy``): already compressed, and smaller
than decoded arrays. See ``results/README.md`` for sending the chunks over consecutive transfers.

Chunks are sized so one chunk, the working tree and ``results/`` fit one transfer together
(:func:`chunk_budget_mib`). On the GPU machine :func:`gather` copies the chunks carried by each
call into a folder that outlives the call (``--packs``, ``$CALIBOOK_PACKS``, default ``/tmp/packs``),
and :func:`unpack_all` unpacks every pack complete there. A pack of PACS must hold every domain
with every class folder non-empty: partial data is refused when packing.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

from lib.config import repo_root, results_dir
from lib.data.locate import candidate_roots, local_data_cache

#: pack name -> folders (relative to a data root) that its pages need.
PACKS: dict[str, tuple[str, ...]] = {
    "cifar10h": ("cifar10", "cifar10h"),
    "pacs": ("pacs",),
    "cifar10": ("cifar10",),
    "mmlu": ("mmlu-llama31",),
    "resnet50-logits": ("cifar10-resnet50-logits",),
}

#: What one call to the GPU machine carries at most (working tree and carried paths together), and
#: what is kept free beside a chunk, the tree and results/ (the archive written back, metadata).
CALL_MIB = 64.0
MARGIN_MIB = 2.0
DEFAULT_PERSISTENT = Path("/tmp/packs")

__all__ = [
    "CALL_MIB",
    "PACKS",
    "chunk_budget_mib",
    "gather",
    "pack",
    "packs_dir",
    "persistent_dir",
    "tree_bytes",
    "unpack",
    "unpack_all",
]


def tree_bytes(root: Path | None = None) -> int:
    """Bytes of the working tree that travels with every call: tracked and untracked-not-ignored
    files (``git ls-files -co --exclude-standard``), ``results/`` included."""
    root = root or repo_root()
    try:
        out = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, capture_output=True, check=True
        ).stdout.decode()
        files = [root / f for f in out.split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = [p for p in root.rglob("*") if p.is_file() and not {".git", ".venv", ".packs", ".cache"} & set(p.parts)]
    total = sum(f.stat().st_size for f in files if f.is_file())
    res = results_dir()
    if res.is_dir() and root not in res.parents:  # results/ elsewhere ($CALIBOOK_RESULTS) travels too
        total += sum(f.stat().st_size for f in res.rglob("*") if f.is_file())
    return total


def chunk_budget_mib(call_mib: float = CALL_MIB, margin_mib: float = MARGIN_MIB, tree: int | None = None) -> float:
    """The largest chunk that fits one call beside the working tree (and results/) and a margin."""
    left = call_mib - margin_mib - (tree_bytes() if tree is None else tree) / 2**20
    if left < 1:
        raise ValueError(
            f"call_mib: the working tree ({(call_mib - margin_mib - left):.1f} MiB with the margin) "
            f"leaves no room for a chunk in a {call_mib:g} MiB call; commit results elsewhere first"
        )
    return float(int(left))


def persistent_dir(given: str | Path | None = None) -> Path:
    """Where chunks are kept on the GPU machine between calls: ``given``, ``$CALIBOOK_PACKS``, or /tmp/packs."""
    return Path(given or os.environ.get("CALIBOOK_PACKS") or DEFAULT_PERSISTENT)


def _check_pacs(folder: Path) -> None:
    """Refuse partial PACS: every domain, every class folder, none empty."""
    from lib.data.image_files import PACS_CLASSES, PACS_DOMAINS

    missing = [
        f"{d}/{c}"
        for d in PACS_DOMAINS
        for c in PACS_CLASSES
        if not (folder / d / c).is_dir() or not any((folder / d / c).iterdir())
    ]
    if missing:
        raise ValueError(
            f"name: {folder} is partial PACS: missing or empty {', '.join(missing[:6])}"
            + (f" and {len(missing) - 6} more" if len(missing) > 6 else "")
            + "; not packed"
        )


def packs_dir() -> Path:
    """``.packs/`` in the repository root (ignored by git; carried to a GPU machine explicitly)."""
    return repo_root() / ".packs"


def _find(folder: str) -> Path:
    for _label, root in candidate_roots():
        if (root / folder).is_dir() and any((root / folder).iterdir()):
            return root / folder
    places = ", ".join(f"{label}: {root / folder}" for label, root in candidate_roots())
    raise FileNotFoundError(f"data folder {folder!r} not found (looked in {places}); see the book's data page")


def pack(name: str, max_mib: float | None = None, out: Path | None = None) -> list[Path]:
    """Write pack ``name`` as chunks of at most ``max_mib`` MiB (``None``: :func:`chunk_budget_mib`,
    what fits one call beside the tree); returns the chunk and manifest paths."""
    if name not in PACKS:
        raise ValueError(f"name: unknown pack {name!r}; valid: {', '.join(PACKS)}")
    budget = chunk_budget_mib()
    if max_mib is None:
        max_mib = budget
    if not isinstance(max_mib, (int, float)) or not 0 < max_mib <= budget:
        raise ValueError(
            f"max_mib: must lie in (0, {budget:g}] (one chunk, the {tree_bytes() / 2**20:.1f} MiB tree "
            f"and results/ fit one {CALL_MIB:g} MiB call), got {max_mib!r}"
        )
    found = {folder: _find(folder) for folder in PACKS[name]}
    if name == "pacs":
        _check_pacs(found["pacs"])
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for folder, path in found.items():
            tar.add(path, arcname=folder)
    blob = buf.getvalue()
    dest = (out or packs_dir()) / name
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("part-*.bin"):
        old.unlink()
    size = int(max_mib * 2**20)
    parts = []
    for i in range(0, max(len(blob), 1), size):
        p = dest / f"part-{i // size:03d}.bin"
        p.write_bytes(blob[i : i + size])
        parts.append(p)
    manifest = {
        "name": name,
        "folders": list(PACKS[name]),
        "bytes": len(blob),
        "sha256": hashlib.sha256(blob).hexdigest(),
        "parts": [{"file": p.name, "sha256": hashlib.sha256(p.read_bytes()).hexdigest()} for p in parts],
    }
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


def _complete(folder: Path) -> tuple[bool, str]:
    """Whether the chunks of the pack in ``folder`` are all there, and a line saying so."""
    manifest = json.loads((folder / "manifest.json").read_text())
    have = [p["file"] for p in manifest["parts"] if (folder / p["file"]).exists()]
    n = len(manifest["parts"])
    return len(have) == n, f"pack {folder.name}: {len(have)} of {n} chunks in {folder.parent}"


def gather(src: Path | None = None, persistent: Path | None = None) -> list[str]:
    """Copy the chunks and manifests carried under ``src`` (``.packs/``) into ``persistent`` (kept
    between calls on the GPU machine); return a line per pack found there saying how complete it is."""
    src = src or packs_dir()
    persistent = persistent_dir(persistent)
    for f in sorted(src.glob("*/*")) if src.is_dir() else []:
        if f.is_file() and (f.name == "manifest.json" or f.name.startswith("part-")):
            dest = persistent / f.parent.name / f.name
            if not dest.exists() or dest.stat().st_size != f.stat().st_size or f.name == "manifest.json":
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f, dest)
    return [_complete(m.parent)[1] for m in sorted(persistent.glob("*/manifest.json"))] if persistent.is_dir() else []


def unpack_all(src: Path | None = None, *more: Path) -> list[str]:
    """Unpack every complete pack under ``src`` (``.packs/``) and the folders ``more`` whose folders
    are not in the data cache yet; incomplete packs are left for a later call."""
    done: list[str] = []
    for root in [src or packs_dir(), *more]:
        for mpath in sorted(Path(root).glob("*/manifest.json")):
            name = mpath.parent.name
            folders = json.loads(mpath.read_text())["folders"]
            if name in done or all((local_data_cache() / f).is_dir() for f in folders):
                continue
            if not _complete(mpath.parent)[0]:
                continue
            unpack(name, Path(root))
            done.append(name)
    return done
