"""Runs computed once, keyed by their config, checkpointed and resumable.

A run lives in ``<cache>/runs/<group>/<key>/`` where ``key`` hashes the run's config (netcal's
stored logits and uvadlc's checkpoint-or-train are the model): ``result.json`` marks a finished run
and is loaded instead of recomputed; ``checkpoint.pt`` lets an interrupted run resume. Paper-scale
results produced on a GPU are committed under ``results/<group>/<key>.json`` and take precedence.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
import platform
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from lib.config import cache_dir, repo_root, results_dir


def config_key(config: Mapping[str, Any]) -> str:
    """A short stable hash of a JSON-serialisable config (key order does not matter)."""
    blob = json.dumps(config, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
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
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=repo_root(), capture_output=True,
            text=True, timeout=10, check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def device_name(device: str | torch.device | None = None) -> str:
    """A readable name of the device a run used (GPU model or CPU description)."""
    dev = torch.device(device) if device is not None else None
    if dev is not None and dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    return f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def autocast(device: str | torch.device, bf16: bool = False) -> Any:
    """bf16 autocast on CUDA when ``bf16``; otherwise autocast switched off, which is a no-op context
    on device types without autocast (such as the meta device of the host-sync test). lib.train runs
    the backbone under it with ``bf16`` and the MoE head and losses without; lib.fgr filters in full
    precision inside a bf16 step."""
    dev = torch.device(device)
    if bf16 and dev.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    if torch.amp.is_autocast_available(dev.type):
        return torch.autocast(dev.type, enabled=False)
    return contextlib.nullcontext()


def provenance(device: str | torch.device | None = None) -> dict[str, Any]:
    """Where and when a result was computed: device, date, git commit, library versions."""
    return {
        "device": device_name(device),
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "git_commit": git_commit(),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


class Run:
    """One cached, resumable computation identified by ``group`` and ``config``."""

    def __init__(self, group: str, config: Mapping[str, Any], root: Path | None = None) -> None:
        self.group = group
        self.config = dict(config)
        self.key = config_key(self.config)
        self.dir = (root or cache_dir() / "runs") / group / self.key
        self.committed = results_dir() / group / f"{self.key}.json"

    @property
    def result_path(self) -> Path:
        return self.dir / "result.json"

    @property
    def checkpoint_path(self) -> Path:
        return self.dir / "checkpoint.pt"

    @property
    def done(self) -> bool:
        """True when a finished result exists (committed or cached)."""
        return self.committed.exists() or self.result_path.exists()

    def load_result(self) -> dict[str, Any]:
        """The finished result; committed results win over the local cache."""
        path = self.committed if self.committed.exists() else self.result_path
        with path.open() as fh:
            return json.load(fh)

    def save_result(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """Write the result record (config and provenance added) atomically; returns it."""
        full = {"group": self.group, "key": self.key, "config": self.config, **record}
        full.setdefault("provenance", provenance())
        _atomic_write(
            self.result_path,
            lambda p: p.write_text(json.dumps(full, indent=1, sort_keys=True, default=_jsonable)),
        )
        (self.dir / "config.json").write_text(json.dumps(self.config, indent=1, sort_keys=True))
        return full

    def save_checkpoint(self, state: Mapping[str, Any]) -> None:
        """Save a resumable state (model/optimizer/scheduler state dicts, epoch, history)."""
        _atomic_write(self.checkpoint_path, lambda p: torch.save(dict(state), p))

    def load_checkpoint(self) -> dict[str, Any] | None:
        """The last checkpoint, or ``None`` when the run has not started."""
        if not self.checkpoint_path.exists():
            return None
        return torch.load(self.checkpoint_path, map_location="cpu", weights_only=False)

    def clear_checkpoint(self) -> None:
        """Remove the checkpoint once the result is saved (results are small, checkpoints not)."""
        if self.checkpoint_path.exists():
            self.checkpoint_path.unlink()


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.tolist()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return str(obj)


def cached_run(
    group: str, config: Mapping[str, Any], compute: Callable[[Run], Mapping[str, Any]]
) -> dict[str, Any]:
    """Return the finished result of ``(group, config)``, computing and saving it if needed.

    ``compute(run)`` may use ``run.save_checkpoint``/``run.load_checkpoint`` to resume.
    """
    run = Run(group, config)
    if run.done:
        return run.load_result()
    record = run.save_result(compute(run))
    run.clear_checkpoint()
    return record
