"""Files of a run: atomic writes, SHA-256-verified artifacts (``<name>.npz``) and where they are kept.

An artifact is listed in its run's record with its SHA-256. It is read only when its bytes match and
it loads (:func:`load_artifact`); :func:`damaged_artifact` tells :mod:`calibook.runs` that a
record's artifact is missing or damaged (say a truncated ``predictions.npz``), so the run is
recomputed once with a :class:`CorruptEntryWarning` naming the file instead of failing on every
rerun. Committed artifacts sit beside their record (``results/<page>/<group>/<key>.<name>.npz``),
cached ones in the run's cache folder (``<cache>/runs/<group>/<key>[.<code fingerprint>]/``).
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from lib.config import cache_dir, repo_root
from lib.engine import progress

from lib.data.locate import sha256_file

__all__ = [
    "CorruptEntryWarning",
    "artifact_paths",
    "atomic_write",
    "cache_folder",
    "damaged_artifact",
    "is_committed",
    "load_artifact",
    "results_dir",
    "sha256_file",
]


def results_dir() -> Path:
    """Committed paper-scale results (small signed JSON records and float16 arrays published by the
    queue, :mod:`calibook.gpu.queue`) that pages read; ``CALIBOOK_RESULTS`` overrides (tests use it)."""
    return Path(os.environ.get("CALIBOOK_RESULTS", repo_root() / "results"))


class CorruptEntryWarning(UserWarning):
    """A cached or committed file failed verification; it is ignored (and a cached run recomputed)."""


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Write ``path`` through ``write(tmp)`` into a temporary file beside it, then rename: a reader
    sees either the old file or the whole new one, never a partial write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def warn(path: Path, problem: str, action: str) -> None:
    """Report a damaged file with its path and what is done about it (a warning, which a page shows,
    and the same line on the terminal that runs the page, :func:`lib.engine.progress.note`)."""
    warnings.warn(f"{path}: {problem}; {action}", CorruptEntryWarning, stacklevel=3)
    progress.note(f"warning: {path}: {problem}; {action}", warned=True)


def savez(path: Path, arrays: Mapping[str, Any]) -> None:
    """Write ``arrays`` as one compressed ``.npz`` at ``path``."""
    buf = io.BytesIO()
    np.savez_compressed(buf, **{k: np.asarray(v) for k, v in arrays.items()})
    path.write_bytes(buf.getvalue())


def cache_folder(key: str, code: str) -> str:
    """The cache folder name of a run: its key, and the live code fingerprint of its group if any."""
    return f"{key}.{code}" if code else key


def _checksum(path: Path) -> str | None:
    try:
        return json.loads(path.read_text()).get("checksum")
    except (OSError, ValueError, AttributeError):
        return None


def artifact_paths(record: Mapping[str, Any], name: str) -> list[Path]:
    """Where the artifact ``name`` of a record may be: beside its committed record (the same record:
    same checksum, when the record has one), then in the cache."""
    group, key = record["group"], record["key"]
    committed = [
        p.with_name(f"{key}.{name}.npz")
        for p in sorted(results_dir().glob(f"*/{group}/{key}.json"))
        if record.get("checksum") is None or _checksum(p) == record["checksum"]
    ]
    folder = cache_folder(key, str(record.get("code_fingerprint") or ""))
    return [*committed, cache_dir() / "runs" / group / folder / f"{name}.npz"]


def damaged_artifact(record: Mapping[str, Any], committed_only: bool, cached_dir: Path | None = None) -> str | None:
    """The name of the first artifact of ``record`` that is missing or fails its SHA-256 where it is
    kept (beside the committed record, or in ``cached_dir``), or ``None`` when all are sound."""
    for name, meta in (record.get("artifacts") or {}).items():
        if committed_only:
            places = artifact_paths(record, name)[:-1]
        else:
            places = [(cached_dir or Path()) / str(meta.get("file", f"{name}.npz"))]
        path = next((p for p in places if p.exists()), None)
        if path is None:
            where = places[0] if places else "results/"
            warn(Path(str(where)), f"artifact {name!r} of the record is missing", "ignored")
            return name
        if sha256_file(path) != meta.get("sha256"):
            warn(path, "artifact does not match the SHA-256 in its record (truncated, edited or replaced)", "ignored")
            return name
    return None


def is_committed(record: Mapping[str, Any]) -> bool:
    """Whether a record comes from the committed ``results/`` (else from the local cache): a record
    with this key is committed there, and it is this record (same checksum, when it has one)."""
    paths = results_dir().glob(f"*/{record.get('group')}/{record.get('key')}.json")
    return any(record.get("checksum") is None or _checksum(p) == record["checksum"] for p in paths)


def load_artifact(record: Mapping[str, Any], name: str) -> dict[str, np.ndarray]:
    """The verified arrays ``name`` of a finished ``record`` (committed copy first, then the cache).

    Raises ``FileNotFoundError`` naming every place looked at when no copy with the recorded SHA-256
    exists (a damaged copy is reported with a :class:`CorruptEntryWarning`)."""
    if not isinstance(record, Mapping) or "key" not in record or "group" not in record:
        raise ValueError("record: expected a finished run record (with 'group' and 'key')")
    meta = (record.get("artifacts") or {}).get(name)
    if meta is None:
        raise ValueError(
            f"name: run {record['key']} has no artifact {name!r} (has: {sorted(record.get('artifacts') or {})})"
        )
    places = artifact_paths(record, name)
    for path in (p for p in places if p.exists()):  # a copy whose bytes match the record and that loads
        if sha256_file(path) != meta["sha256"]:
            warn(path, "artifact does not match the SHA-256 in its record (truncated, edited or replaced)", "ignored")
            continue
        try:
            with np.load(path) as z:
                return {k: z[k] for k in z.files}
        except Exception as err:  # noqa: BLE001 - a file that does not load cannot be used
            warn(path, f"artifact cannot be read ({type(err).__name__}: {err})", "ignored")
    raise FileNotFoundError(
        f"artifact {name!r} of run {record['group']}/{record['key']} not found; looked in: "
        + ", ".join(str(p) for p in places)
    )
