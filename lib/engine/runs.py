"""Runs computed once, keyed by what determines them, checkpointed, resumable and verified on read.

A run is identified by its ``group`` (what computes it: ``"moe"``, ``"rr_losses"``, ...), its config
and the code version of that group (:mod:`lib.engine.versions`): the key hashes all three, so a
change of the code that computes a group (once its version is bumped) never returns a stale result.

Layout of one run in the local cache, ``<cache>/runs/<group>/<key>/``:

* ``result.json``: the finished record (config, version, provenance, artifacts with their SHA-256,
  and a checksum of the record itself). Its presence marks a finished run, which is loaded, never
  recomputed.
* ``<name>.npz``: arrays saved with :meth:`Run.save_arrays` (predictions, logits, features).
* ``checkpoint.pt``: the state an interrupted run resumes from (removed when the run finishes).
* ``.lock``: a per-run file lock (``filelock``, a small well-kept library that does cross-process
  locks portably): a second process asking for the same run waits, then loads the first one's result.

Committed results (``results/<page>/<group>/<key>.json`` plus ``<key>.<name>.npz``, published by the
paper-scale queue, :mod:`lib.queue`) win over the local cache. Every file is written atomically;
every read is verified (JSON parses, checksum and artifact hashes match, checkpoint loads with
``weights_only=True``). A bad cache entry is reported with its path (a :class:`CorruptEntryWarning`)
and recomputed; a bad committed file is reported and ignored.

Inside ``with training(False):`` nothing is computed: :func:`cached_run` returns what is committed
or cached and raises :class:`RunMissing` for the rest (a paper-scale page reads results, it does not
train unless asked).
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as _dt
import hashlib
import io
import json
import os
import platform
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from filelock import FileLock

from lib.config import cache_dir, repo_root, results_dir
from lib.engine.versions import code_version

RECORD_FORMAT = 2  # layout of result.json / artifacts; part of every key

__all__ = [
    "CorruptEntryWarning", "Run", "RunMissing", "training", "is_committed", "load_artifact", "sign", "cached_run", "config_key", "git_commit", "provenance", "RECORD_FORMAT",
]


class CorruptEntryWarning(UserWarning):
    """A cached or committed file failed verification; it is ignored (and a cached run recomputed)."""


class RunMissing(LookupError):
    """A run asked for while training is off (:func:`training`) is neither committed nor cached."""


_TRAINING: contextvars.ContextVar[bool] = contextvars.ContextVar("calibook_training", default=True)


@contextlib.contextmanager
def training(allowed: bool) -> Iterator[None]:
    """Within the block, :func:`cached_run` computes runs only if ``allowed``; otherwise a run that
    is neither committed nor cached raises :class:`RunMissing` (nothing is trained)."""
    if not isinstance(allowed, bool):
        raise ValueError(f"allowed: expected True or False, got {allowed!r}")
    token = _TRAINING.set(allowed)
    try:
        yield
    finally:
        _TRAINING.reset(token)


def training_allowed() -> bool:
    """Whether :func:`cached_run` may compute missing runs here (see :func:`training`)."""
    return _TRAINING.get()


def _jsonable(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return str(obj)


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, default=_jsonable).encode()


def config_key(config: Mapping[str, Any]) -> str:
    """A short stable hash of a JSON-serialisable config (key order does not matter)."""
    return hashlib.sha256(_canonical(config)).hexdigest()[:16]


def sha256_file(path: Path) -> str:
    """SHA-256 of a file's bytes (hex)."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


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


def git_commit() -> str:
    """The repository's HEAD commit, or ``"unknown"`` outside a git checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo_root(), capture_output=True,
                             text=True, timeout=10, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def provenance(device: str | torch.device | None = None) -> dict[str, Any]:
    """Where and when a result was computed: device, date, git commit, library versions."""
    from lib.engine.device import device_name

    return {
        "device": device_name(device),
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "git_commit": git_commit(),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


def sign(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record as plain JSON types with its ``checksum`` (SHA-256 of everything else) set."""
    body = json.loads(_canonical({k: v for k, v in record.items() if k != "checksum"}))
    body["checksum"] = hashlib.sha256(_canonical(body)).hexdigest()
    return body


def _warn(path: Path, problem: str, action: str) -> None:
    warnings.warn(f"{path}: {problem}; {action}", CorruptEntryWarning, stacklevel=3)


def read_record(path: Path) -> dict[str, Any] | None:
    """The verified record at ``path``, or ``None`` (with a warning naming the file and the problem)
    when it is empty, truncated, not JSON, or its checksum does not match its content."""
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        _warn(path, f"unreadable result record ({type(err).__name__}: {err})", "ignored")
        return None
    if not isinstance(record, dict) or "checksum" not in record:
        _warn(path, "result record has no checksum (written by an older version or edited)", "ignored")
        return None
    body = {k: v for k, v in record.items() if k != "checksum"}
    if hashlib.sha256(_canonical(body)).hexdigest() != record["checksum"]:
        _warn(path, "result record does not match its checksum (edited or damaged)", "ignored")
        return None
    return record


class Run:
    """One cached, resumable computation identified by ``group``, ``config`` and the group's code version.

    ``version`` defaults to :func:`lib.engine.versions.code_version` of the group.
    """

    def __init__(self, group: str, config: Mapping[str, Any], root: Path | None = None,
                 version: int | None = None) -> None:
        if not isinstance(group, str) or not group or "/" in group:
            raise ValueError(f"group: must be a non-empty name without '/', got {group!r}")
        self.group = group
        self.config = dict(config)
        self.version = code_version(group) if version is None else int(version)
        self.key = config_key({"group": group, "config": self.config, "version": self.version,
                               "format": RECORD_FORMAT})
        self.dir = (root or cache_dir() / "runs") / group / self.key
        self._artifacts: dict[str, dict[str, str]] = {}

    # ---- paths ----------------------------------------------------------------------------------
    @property
    def result_path(self) -> Path:
        return self.dir / "result.json"

    @property
    def checkpoint_path(self) -> Path:
        return self.dir / "checkpoint.pt"

    def committed_paths(self) -> list[Path]:
        """Committed records of this run: ``results/<page>/<group>/<key>.json`` (any page)."""
        return sorted(results_dir().glob(f"*/{self.group}/{self.key}.json"))

    # ---- results --------------------------------------------------------------------------------
    def _committed(self) -> dict[str, Any] | None:
        for path in self.committed_paths():
            rec = read_record(path)
            if rec is not None and rec.get("key") == self.key:
                rec["_path"] = str(path)
                return rec
        return None

    def _cached(self) -> dict[str, Any] | None:
        if not self.result_path.exists():
            return None
        rec = read_record(self.result_path)
        if rec is None:
            self.discard("the damaged entry is recomputed")
        return rec

    @property
    def done(self) -> bool:
        """True when a verified finished result exists (committed or cached)."""
        return self.load_result() is not None

    def load_result(self) -> dict[str, Any] | None:
        """The verified finished record (committed first, then the cache), or ``None``."""
        rec = self._committed() or self._cached()
        if rec is not None:
            rec.pop("_path", None)
        return rec

    def save_result(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """Write the record (group, key, config, version, artifacts, provenance, checksum) atomically."""
        full = {"group": self.group, "key": self.key, "config": self.config, "version": self.version,
                "format": RECORD_FORMAT, **dict(record)}
        full.setdefault("provenance", provenance())
        if self._artifacts:
            full["artifacts"] = dict(self._artifacts)
        full = sign(full)  # plain JSON types, as they will be read back
        atomic_write(self.result_path, lambda p: p.write_text(json.dumps(full, indent=1, sort_keys=True)))
        return full

    def discard(self, why: str) -> None:
        """Remove the cached entry (a damaged one), warning with its path."""
        _warn(self.dir, "damaged cache entry", why)
        for p in self.dir.glob("*"):
            if p.name != ".lock":
                p.unlink() if p.is_file() else shutil.rmtree(p, ignore_errors=True)

    # ---- artifacts ------------------------------------------------------------------------------
    def save_arrays(self, name: str, **arrays: Any) -> Path:
        """Save named arrays as ``<name>.npz`` beside the record (atomically), recording its SHA-256."""
        if not name.isidentifier():
            raise ValueError(f"name: must be an identifier, got {name!r}")
        path = self.dir / f"{name}.npz"
        atomic_write(path, lambda p: _savez(p, arrays))
        self._artifacts[name] = {"file": path.name, "sha256": sha256_file(path)}
        return path

    def load_arrays(self, name: str, record: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
        """The arrays saved under ``name``, verified against the record's SHA-256; committed copy first."""
        record = record if record is not None else self.load_result()
        if record is None:
            raise FileNotFoundError(f"run {self.group}/{self.key} has no finished result")
        return load_artifact(record, name)

    # ---- checkpoints ----------------------------------------------------------------------------
    def save_checkpoint(self, state: Mapping[str, Any]) -> None:
        """Save a resumable state (tensors, numbers, strings, lists/dicts/tuples of them) atomically."""
        atomic_write(self.checkpoint_path, lambda p: torch.save(dict(state), p))

    def load_checkpoint(self) -> dict[str, Any] | None:
        """The last checkpoint (loaded with ``weights_only=True``), or ``None`` when the run has not
        started or the checkpoint is damaged (then it is removed with a warning and the run restarts)."""
        if not self.checkpoint_path.exists():
            return None
        try:
            return torch.load(self.checkpoint_path, map_location="cpu", weights_only=True)
        except Exception as err:  # noqa: BLE001 - any failure to load means the file cannot be trusted
            _warn(self.checkpoint_path, f"unreadable checkpoint ({type(err).__name__})", "the run restarts")
            self.checkpoint_path.unlink(missing_ok=True)
            return None

    def clear_checkpoint(self) -> None:
        """Remove the checkpoint once the result is saved (results are small, checkpoints not)."""
        self.checkpoint_path.unlink(missing_ok=True)

    def lock(self) -> FileLock:
        """The per-run inter-process lock."""
        self.dir.mkdir(parents=True, exist_ok=True)
        return FileLock(str(self.dir / ".lock"))


def _savez(path: Path, arrays: Mapping[str, Any]) -> None:
    buf = io.BytesIO()
    np.savez_compressed(buf, **{k: np.asarray(v) for k, v in arrays.items()})
    path.write_bytes(buf.getvalue())


def artifact_paths(record: Mapping[str, Any], name: str) -> list[Path]:
    """Where the artifact ``name`` of a record may be: beside its committed record, then in the cache."""
    group, key = record["group"], record["key"]
    committed = [p.with_name(f"{key}.{name}.npz") for p in sorted(results_dir().glob(f"*/{group}/{key}.json"))]
    return [*committed, cache_dir() / "runs" / group / key / f"{name}.npz"]


def is_committed(record: Mapping[str, Any]) -> bool:
    """Whether a record comes from the committed ``results/`` (else from the local cache)."""
    return bool(list(results_dir().glob(f"*/{record.get('group')}/{record.get('key')}.json")))


def load_artifact(record: Mapping[str, Any], name: str) -> dict[str, np.ndarray]:
    """The verified arrays ``name`` of a finished ``record`` (committed copy first, then the cache).

    Raises ``FileNotFoundError`` naming every place looked at when no copy with the recorded SHA-256
    exists (a damaged copy is reported with a :class:`CorruptEntryWarning`)."""
    if not isinstance(record, Mapping) or "key" not in record or "group" not in record:
        raise ValueError("record: expected a finished run record (with 'group' and 'key')")
    meta = (record.get("artifacts") or {}).get(name)
    if meta is None:
        raise ValueError(f"name: run {record['key']} has no artifact {name!r} "
                         f"(has: {sorted(record.get('artifacts') or {})})")
    places = artifact_paths(record, name)
    for path in places:
        if not path.exists():
            continue
        if sha256_file(path) != meta["sha256"]:
            _warn(path, "artifact does not match the SHA-256 in its record", "ignored")
            continue
        with np.load(path) as z:
            return {k: z[k] for k in z.files}
    raise FileNotFoundError(f"artifact {name!r} of run {record['group']}/{record['key']} not found; looked in: "
                            + ", ".join(str(p) for p in places))


def cached_run(group: str, config: Mapping[str, Any], compute: Callable[[Run], Mapping[str, Any]]) -> dict[str, Any]:
    """Return the finished result of ``(group, config)``, computing and saving it if needed.

    ``compute(run)`` may use ``run.save_checkpoint``/``run.load_checkpoint`` to resume and
    ``run.save_arrays`` for large outputs. Two processes asking for the same run do not both compute
    it: the second waits on the run's lock and then loads the first one's result.
    """
    run = Run(group, config)
    record = run.load_result()
    if record is not None:
        return record
    if not training_allowed():
        raise RunMissing(f"run {group}/{run.key} is not in results/ nor in the cache, and training is off")
    with run.lock():
        record = run.load_result()  # finished by another process while we waited
        if record is not None:
            return record
        record = run.save_result(compute(run))
        run.clear_checkpoint()
    return record
