"""Data that travels: a dataset's files as a compressed pack that one call to the GPU machine carries.

A GPU machine receives only the working tree and the ignored paths a call names, at most 64 MiB per
call, and not the data beside it; it is fresh at every call. ``python -m calibook pack NAME`` writes the
folders a page needs (as found by :mod:`lib.data.locate`: ``$CALIBOOK_DATA``, ``../shared/data``, the
local cache) into one gzip-compressed tar stream cut into chunks ``.packs/<name>/part-NNN.bin`` with
a ``manifest.json`` (SHA-256 of every chunk and of the whole). CIFAR-10's 60,000 small JPEGs repeat
the same ~600 header bytes, so its pack is a third of the files' size and, with the tree and
``results/``, fits one call: every call carries the whole pack.

Chunks are sized when packing, from the tree and ``results/`` as they are then
(:func:`chunk_budget_mib`); :func:`check_carry` (``python -m calibook paper --carry PATH ...``, run here
before every call) refuses a call whose tree and carried paths exceed 64 MiB, or that carries part
of a pack, before anything is sent. On the machine :func:`unpack_all` joins and verifies every pack
carried and extracts it into the local data cache, where every loader looks; a missing chunk is
named as such. A pack of PACS must hold every domain with every class folder non-empty.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from collections.abc import Sequence
from pathlib import Path

from lib.config import repo_root
from calibook.artifacts import results_dir
from lib.data.image_files import PACS_CLASSES, PACS_DOMAINS
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
#: what is kept free beside a chunk, the tree and results/ when packing (results published later).
CALL_MIB = 64.0
MARGIN_MIB = 4.0
MIB = 2**20

__all__ = [
    "CALL_MIB",
    "PACKS",
    "check_carry",
    "chunk_budget_mib",
    "stages",
    "staged",
    "pack",
    "packs_dir",
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
    left = call_mib - margin_mib - (tree_bytes() if tree is None else tree) / MIB
    if left < 1:
        raise ValueError(
            f"call_mib: the working tree ({(call_mib - margin_mib - left):.1f} MiB with the margin) "
            f"leaves no room for a chunk in a {call_mib:g} MiB call; commit results elsewhere first"
        )
    return float(int(left))


def _check_pacs(folder: Path) -> None:
    """Refuse partial PACS: every domain, every class folder, none empty."""
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


def pack(dataset: str, max_mib: float | None = None, out: Path | None = None) -> list[Path]:
    """Write pack ``dataset`` (gzip-compressed) as chunks of at most ``max_mib`` MiB (``None``:
    :func:`chunk_budget_mib`, what fits one call beside the tree now); returns the chunks and the
    manifest. A pack in more than one chunk cannot travel in one call."""
    if dataset not in PACKS:
        raise ValueError(f"dataset: unknown pack {dataset!r}; valid: {', '.join(PACKS)}")
    budget = chunk_budget_mib()
    if max_mib is None:
        max_mib = budget
    if not isinstance(max_mib, (int, float)) or not 0 < max_mib <= budget:
        raise ValueError(
            f"max_mib: must lie in (0, {budget:g}] (one chunk, the {tree_bytes() / MIB:.1f} MiB tree "
            f"and results/ fit one {CALL_MIB:g} MiB call), got {max_mib!r}"
        )
    found = {folder: _find(folder) for folder in PACKS[dataset]}
    if dataset == "pacs":
        _check_pacs(found["pacs"])
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        for folder, path in found.items():
            tar.add(path, arcname=folder)
    blob = buf.getvalue()
    dest = (out or packs_dir()) / dataset
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("part-*.bin"):
        old.unlink()
    size = int(max_mib * MIB)
    parts = []
    for i in range(0, max(len(blob), 1), size):
        p = dest / f"part-{i // size:03d}.bin"
        p.write_bytes(blob[i : i + size])
        parts.append(p)
    manifest = {
        "name": dataset,
        "folders": list(PACKS[dataset]),
        "bytes": len(blob),
        "sha256": hashlib.sha256(blob).hexdigest(),
        "parts": [{"file": p.name, "sha256": hashlib.sha256(p.read_bytes()).hexdigest()} for p in parts],
    }
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return [*parts, dest / "manifest.json"]


def _manifest(folder: Path) -> dict:
    mpath = folder / "manifest.json"
    if not mpath.exists():
        raise FileNotFoundError(
            f"{mpath} missing: pack {folder.name!r} was not sent (python -m calibook pack {folder.name})"
        )
    return json.loads(mpath.read_text())


def unpack(name: str, src: Path | None = None, dest: Path | None = None) -> Path:
    """Join and verify the chunks of pack ``name`` and extract them into the local data cache (or
    ``dest``); a missing or damaged chunk raises ``FileNotFoundError``/``ValueError`` naming it."""
    folder = (src or packs_dir()) / name
    manifest = _manifest(folder)
    blob = b""
    for part in manifest["parts"]:
        p = folder / part["file"]
        if not p.exists():
            raise FileNotFoundError(f"{p} missing: send every chunk of pack {name!r}")
        data = p.read_bytes()
        if hashlib.sha256(data).hexdigest() != part["sha256"]:
            raise ValueError(f"{p}: damaged chunk (SHA-256 differs from manifest.json)")
        blob += data
    if hashlib.sha256(blob).hexdigest() != manifest["sha256"]:
        raise ValueError(f"pack {name!r}: the joined chunks do not match {folder / 'manifest.json'}")
    target = dest or local_data_cache()
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:*") as tar:
        tar.extractall(target, filter="data")
    return target


def unpack_all(src: Path | None = None) -> list[str]:
    """Unpack every pack under ``src`` (``.packs/``) not in the data cache yet (a marker per pack
    holds the SHA-256 it was unpacked from); one line per pack. A pack that lacks chunks raises
    ``ValueError`` naming them: a call carries every chunk of what it trains on."""
    lines: list[str] = []
    for mpath in sorted(Path(src or packs_dir()).glob("*/manifest.json")):
        name, manifest = mpath.parent.name, json.loads(mpath.read_text())
        lacking = [p["file"] for p in manifest["parts"] if not (mpath.parent / p["file"]).exists()]
        if lacking:
            raise ValueError(
                f"packs: pack {name} lacks {', '.join(lacking)} (this call carried "
                f"{len(manifest['parts']) - len(lacking)} of its {len(manifest['parts'])} chunks); "
                f"carry .packs/{name} whole (results/README.md)"
            )
        marker = local_data_cache() / f".pack-{name}.sha256"
        if marker.exists() and marker.read_text() == manifest["sha256"]:
            lines.append(f"pack {name}: in the data cache already (sha256 {manifest['sha256'][:12]})")
            continue
        unpack(name, mpath.parent.parent)
        marker.write_text(manifest["sha256"])
        lines.append(
            f"pack {name}: {manifest['bytes'] / MIB:.1f} MiB unpacked into the data cache (sha256 {manifest['sha256'][:12]})"
        )
    return lines


def check_carry(carry: Sequence[str], root: Path | None = None, staged: bool = False) -> str:
    """Check a call that carries the ignored paths ``carry`` (relative to the repository root) beside
    the tree: every pack it carries is whole (manifest and every chunk; ``staged``: one call of
    :func:`stages`, whose chunks gather on a warm machine, may carry part of one) and all of it fits
    :data:`CALL_MIB`. Returns one line with the sizes; raises ``ValueError`` saying what is wrong."""
    root = root or repo_root()
    files: set[Path] = set()
    for c in carry:
        p = root / c
        if not p.exists():
            raise ValueError(f"carry: {c} does not exist here (python -m calibook pack NAME writes .packs/NAME)")
        files |= {p} if p.is_file() else {f for f in p.rglob("*") if f.is_file()}
    packed = {f.parent for f in files if f.name == "manifest.json" or f.name.startswith("part-")}
    for folder in [] if staged else sorted(packed):
        lacking = [
            n for n in ["manifest.json", *(q["file"] for q in _manifest(folder)["parts"])] if folder / n not in files
        ]
        if lacking:
            raise ValueError(
                f"carry: pack {folder.name} lacks {', '.join(lacking)}: carry .packs/{folder.name} whole "
                "(a call carries every chunk of what it trains on)"
            )
    tree, carried = tree_bytes(root), sum(f.stat().st_size for f in files)
    line = f"carry: tree {tree / MIB:.1f} MiB + {' '.join(carry) or 'nothing'} {carried / MIB:.1f} MiB = {(tree + carried) / MIB:.1f} MiB of {CALL_MIB:g}"
    line += " (staged: the chunks gather on the warm machine)" if staged else ""
    if tree + carried > CALL_MIB * MIB:
        raise ValueError(
            f"{line}: the call would be refused. Carry fewer packs per call, keep results/ out of the tree "
            "($CALIBOOK_RESULTS), or stage a pack over consecutive calls on a warm machine (`python -m "
            f"calibook pack {min(packed).name if packed else 'NAME'} --with ...` says which call carries what; "
            "results/README.md)"
        )
    return line


def stages(
    carry: Sequence[str], root: Path | None = None, call_mib: float = CALL_MIB, margin_mib: float = MARGIN_MIB
) -> list[list[str]]:
    """What consecutive calls to one warm machine carry when ``carry`` (packs under ``.packs/`` and other
    ignored paths, e.g. ``.weights``) does not fit one call: each call's paths, packs first (each one's
    manifest with its first chunk, its chunks in order), the other paths last, every call within
    ``call_mib`` beside the tree and ``margin_mib``. The machine keeps what earlier calls left while it
    is warm (30 s after a call), so the last call finds the packs whole (:func:`staged`) and trains;
    a call that finds the machine cold finds chunks missing and says so. One call when all fits."""
    root = root or repo_root()
    room = (call_mib - margin_mib) * MIB - tree_bytes(root)
    items: list[tuple[str, int]] = []
    for c in carry:
        p = root / c
        if not p.exists():
            raise ValueError(f"carry: {c} does not exist here (python -m calibook pack NAME writes .packs/NAME)")
        if (p / "manifest.json").exists():
            parts = [q["file"] for q in _manifest(p)["parts"]]
            items += [(f"{c}/{n}", (p / n).stat().st_size) for n in ["manifest.json", *parts]]
    for c in carry:
        p = root / c
        if not (p / "manifest.json").exists():
            items.append(
                (c, p.stat().st_size if p.is_file() else sum(f.stat().st_size for f in p.rglob("*") if f.is_file()))
            )
    calls: list[list[str]] = [[]]
    used = 0
    for path, size in items:
        if size > room:
            raise ValueError(
                f"carry: {path} ({size / MIB:.1f} MiB) does not fit one call beside the tree; pack smaller chunks"
            )
        if used + size > room and calls[-1]:
            calls.append([])
            used = 0
        calls[-1].append(path)
        used += size
    return calls


def staged(name: str, src: Path | None = None) -> str:
    """On the machine, between the calls of :func:`stages`: which chunks of pack ``name`` are here and
    sound (each checked against the manifest), and which are still to come; one line."""
    folder = (src or packs_dir()) / name
    if not (folder / "manifest.json").exists():
        return f"pack {name}: no manifest here yet (the first call of the stages carries it)"
    parts = _manifest(folder)["parts"]
    here = [q for q in parts if (folder / q["file"]).exists()]
    for q in here:
        if hashlib.sha256((folder / q["file"]).read_bytes()).hexdigest() != q["sha256"]:
            raise ValueError(f"{folder / q['file']}: damaged chunk (SHA-256 differs from manifest.json)")
    to_come = [q["file"] for q in parts if q not in here]
    return f"pack {name}: {len(here)} of {len(parts)} chunks here and sound" + (
        f"; to come: {', '.join(to_come)}" if to_come else "; whole"
    )
