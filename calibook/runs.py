"""Runs computed once, keyed by what determines them, checkpointed, resumable and verified on read.

A run is identified by its ``group`` (what computes it: ``"moe"``, ``"rr_losses"``, ...), its config
and the code version of that group (:mod:`calibook.versions`): ``key`` hashes the three and names
committed results. The local cache folder adds the *live* code fingerprint of the group
(``<key>.<fingerprint>``), so any edit of code the group depends on is recomputed, never served
from the cache, while other groups keep theirs. A committed record is used only when its fingerprint
and the live one are both accepted for the group's version in ``versions.json``; otherwise it is
ignored with one warning per group (see :mod:`calibook.versions`).

Layout of one run in the local cache, ``<cache>/runs/<group>/<key>[.<fingerprint>]/``:

* ``result.json``: the finished record (config, version, provenance, artifacts with their SHA-256,
  and a checksum of the record itself). Its presence marks a finished run, which is loaded, never
  recomputed.
* ``<name>.npz``: arrays saved with :meth:`Run.save_arrays` (predictions, logits, features).
* ``checkpoint.pt``: the state an interrupted run resumes from (removed when the run finishes).
* ``.lock``: a per-run file lock (``filelock``, a small well-kept library that does cross-process
  locks portably): a second process asking for the same run waits, then loads the first one's result.

Committed results (``results/<page>/<group>/<key>.json`` plus ``<key>.<name>.npz``, published by the
paper-scale queue, :mod:`calibook.gpu.queue`) win over the local cache. Every file is written atomically;
every read is verified (JSON parses, checksum matches, every artifact the record lists is there
with its SHA-256 and loads, checkpoint loads with ``weights_only=True``). A bad cache entry (say a
truncated ``predictions.npz``) is reported once with its path (a :class:`CorruptEntryWarning`) and
recomputed; a bad committed file is reported and ignored.

Inside ``with training(False):`` nothing is computed: :func:`cached_run` returns what is committed
or cached and raises :class:`RunMissing` for the rest (a paper-scale page reads results, it does not
train unless asked).
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as _dt
import hashlib
import json
import platform
import shutil
import subprocess
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import torch
from filelock import FileLock, Timeout

from lib.config import cache_dir, repo_root
from calibook.artifacts import (
    CorruptEntryWarning,
    artifact_paths,
    atomic_write,
    cache_folder,
    damaged_artifact,
    is_committed,
    load_artifact,
    results_dir,
    savez,
    sha256_file,
    warn,
)
from lib.engine import progress
from lib.engine.device import device_name
from calibook.versions import accepted_fingerprints, code_version, live_fingerprint
from lib.engine.cache import RunMissing
from lib.validation import check_bool

RECORD_FORMAT = 2  # layout of result.json / artifacts; part of every key

__all__ = [
    "CorruptEntryWarning",
    "StaleCodeWarning",
    "Run",
    "artifact_paths",
    "RunMissing",
    "training",
    "is_committed",
    "load_artifact",
    "sign",
    "cached_run",
    "config_key",
    "provenance",
    "read_record",
    "RECORD_FORMAT",
]


_WARNED: set[tuple[str, str]] = set()  # (group, reason) of stale committed results already reported


class StaleCodeWarning(UserWarning):
    """Committed results of a group were made by code not accepted for today's (see calibook.versions)."""


_TRAINING: contextvars.ContextVar[bool] = contextvars.ContextVar("calibook_training", default=True)


@contextlib.contextmanager
def training(allowed: bool) -> Iterator[None]:
    """Within the block, :func:`cached_run` computes runs only if ``allowed``; otherwise a run that
    is neither committed nor cached raises :class:`RunMissing` (nothing is trained)."""
    token = _TRAINING.set(check_bool(allowed, "allowed"))
    try:
        yield
    finally:
        _TRAINING.reset(token)


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)).encode()


def config_key(config: Mapping[str, Any]) -> str:
    """A short stable hash of a JSON-serialisable config (key order does not matter)."""
    return hashlib.sha256(_canonical(config)).hexdigest()[:16]


def provenance(device: str | torch.device | None = None) -> dict[str, Any]:
    """Where and when a result was computed: device, date, git commit (the repository's HEAD, or
    ``"unknown"`` outside a git checkout), library versions."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=repo_root(),
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    return {
        "device": device_name(device),
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "git_commit": commit,
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


def sign(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record as plain JSON types with its ``checksum`` (SHA-256 of everything else) set."""
    body = json.loads(_canonical({k: v for k, v in record.items() if k != "checksum"}))
    body["checksum"] = hashlib.sha256(_canonical(body)).hexdigest()
    return body


def read_record(path: Path) -> dict[str, Any] | None:
    """The verified record at ``path``, or ``None`` (with a warning naming the file and the problem)
    when it is empty, truncated, not JSON, or its checksum does not match its content."""
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        warn(path, f"unreadable result record ({type(err).__name__}: {err})", "ignored")
        return None
    if not isinstance(record, dict) or "checksum" not in record:
        warn(path, "result record has no checksum (written by an older version or edited)", "ignored")
        return None
    if sign(record)["checksum"] != record["checksum"]:
        warn(path, "result record does not match its checksum (edited or damaged)", "ignored")
        return None
    return record


class Run:
    """One cached, resumable computation identified by ``group``, ``config`` and the group's code version.

    ``version`` defaults to :func:`calibook.versions.code_version` of the group; ``code`` (the
    live fingerprint of the group's code, ``""`` for a group without code of its own) is part of the
    cache folder's name, not of ``key``.
    """

    def __init__(
        self, group: str, config: Mapping[str, Any], root: Path | None = None, version: int | None = None
    ) -> None:
        if not isinstance(group, str) or not group or "/" in group:
            raise ValueError(f"group: must be a non-empty name without '/', got {group!r}")
        self.group = group
        self.config = dict(config)
        self.version = code_version(group) if version is None else int(version)
        self.key = config_key({"group": group, "config": self.config, "version": self.version, "format": RECORD_FORMAT})
        self.code = live_fingerprint(group)
        self.dir = (root or cache_dir() / "runs") / group / cache_folder(self.key, self.code)
        self._artifacts: dict[str, dict[str, str]] = {}

    # ---- paths ----------------------------------------------------------------------------------
    @property
    def result_path(self) -> Path:
        return self.dir / "result.json"

    @property
    def checkpoint_path(self) -> Path:
        return self.dir / "checkpoint.pt"

    # ---- results --------------------------------------------------------------------------------
    def _committed(self) -> dict[str, Any] | None:
        for path in sorted(results_dir().glob(f"*/{self.group}/{self.key}.json")):  # on any page
            rec = read_record(path)
            if rec is None or rec.get("key") != self.key:
                continue
            if not self._code_accepted(rec, path):
                continue
            if damaged_artifact(rec, committed_only=True) is not None:
                continue  # warned; the cache or a recomputation serves the run
            return rec
        return None

    def _code_accepted(self, rec: Mapping[str, Any], path: Path) -> bool:
        """Whether a committed record's code and the live code both give this version's results."""
        if not self.code:
            return True
        accepted = accepted_fingerprints(self.group)
        made_by = rec.get("code_fingerprint")
        if self.code in accepted and (made_by is None or made_by in accepted):
            return True
        why = (
            f"the code of group {self.group!r} changed (live fingerprint {self.code} is not accepted for "
            f"version {self.version} in calibook/versions.json)"
            if self.code not in accepted
            else f"it was made by code {made_by}, not accepted for version {self.version} of {self.group!r}"
        )
        if (self.group, why) not in _WARNED:
            _WARNED.add((self.group, why))
            text = (
                f"{path.parent}: committed results ignored: {why}; runs are recomputed where training "
                "is allowed (python -m calibook.versions accepts a refactor, --bump GROUP starts "
                "a new version)"
            )
            warnings.warn(text, StaleCodeWarning, stacklevel=4)
            progress.note(f"warning: {text}", warned=True)
        return False

    def _cached(self) -> dict[str, Any] | None:
        if not self.result_path.exists():
            return None
        rec = read_record(self.result_path)
        if rec is None:
            self.discard("the damaged entry is recomputed")
            return None
        bad = damaged_artifact(rec, committed_only=False, cached_dir=self.dir)
        if bad is not None:
            self.discard(f"its artifact {bad!r} is missing or damaged; the run is recomputed")
            return None
        return rec

    @property
    def done(self) -> bool:
        """True when a verified finished result exists (committed or cached)."""
        return self.load_result() is not None

    def load_result(self) -> dict[str, Any] | None:
        """The verified finished record (committed first, then the cache), or ``None``."""
        return self._committed() or self._cached()

    def save_result(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """Write the record (group, key, config, version, artifacts, provenance, checksum) atomically."""
        full = {
            "group": self.group,
            "key": self.key,
            "config": self.config,
            "version": self.version,
            "format": RECORD_FORMAT,
            **dict(record),
        }
        if self.code:
            full["code_fingerprint"] = self.code
        full.setdefault("provenance", provenance())
        if self._artifacts:
            full["artifacts"] = dict(self._artifacts)
        full = sign(full)  # plain JSON types, as they will be read back
        atomic_write(self.result_path, lambda p: p.write_text(json.dumps(full, indent=1, sort_keys=True)))
        return full

    def discard(self, why: str) -> None:
        """Remove the cached entry (a damaged one), warning with its path."""
        warn(self.dir, "damaged cache entry", why)
        for p in self.dir.glob("*"):
            if p.name != ".lock":
                p.unlink() if p.is_file() else shutil.rmtree(p, ignore_errors=True)

    # ---- artifacts ------------------------------------------------------------------------------
    def save_arrays(self, name: str, **arrays: Any) -> Path:
        """Save named arrays as ``<name>.npz`` beside the record (atomically), recording its SHA-256."""
        if not name.isidentifier():
            raise ValueError(f"name: must be an identifier, got {name!r}")
        path = self.dir / f"{name}.npz"
        atomic_write(path, lambda p: savez(p, arrays))
        self._artifacts[name] = {"file": path.name, "sha256": sha256_file(path)}
        return path

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
            warn(self.checkpoint_path, f"unreadable checkpoint ({type(err).__name__})", "the run restarts")
            self.checkpoint_path.unlink(missing_ok=True)
            return None

    def clear_checkpoint(self) -> None:
        """Remove the checkpoint once the result is saved (results are small, checkpoints not)."""
        self.checkpoint_path.unlink(missing_ok=True)

    def lock(self) -> FileLock:
        """The per-run inter-process lock."""
        self.dir.mkdir(parents=True, exist_ok=True)
        return FileLock(str(self.dir / ".lock"))


def cached_run(group: str, config: Mapping[str, Any], compute: Callable[[Run], Mapping[str, Any]]) -> dict[str, Any]:
    """Return the finished result of ``(group, config)``, computing and saving it if needed.

    ``compute(run)`` may use ``run.save_checkpoint``/``run.load_checkpoint`` to resume and
    ``run.save_arrays`` for large outputs. Two processes asking for the same run do not both compute
    it: the second says so (:func:`lib.engine.progress.note`), waits on the run's lock and then loads
    the first one's result.
    """
    run = Run(group, config)
    record = run.load_result()
    if record is not None:
        return record
    if not _TRAINING.get():
        raise RunMissing(f"run {group}/{run.key} is not in results/ nor in the cache, and training is off")
    lock = run.lock()
    try:
        lock.acquire(timeout=0)
    except Timeout:
        progress.note(f"run {group}/{run.key}: another process is computing it; waiting for its result")
        lock.acquire()
    try:
        record = run.load_result()  # finished by another process while we waited
        if record is not None:
            return record
        record = run.save_result(compute(run))
        run.clear_checkpoint()
    finally:
        lock.release()
    return record
