"""Finding real data on disk, in one fixed order, with an error that says how to get it.

Search order (foundation issue): an explicit argument, the environment variable ``CALIBOOK_DATA``,
``../shared/data`` beside the repository (see that folder's README), the local cache
(``<cache>/data``), then the official download (HF ``datasets`` or torchvision) when online.
When nothing works, :class:`DataNotFoundError` names the dataset, every place that was tried
and how to get the data.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from lib.config import cache_dir, repo_root

DATA_ENV = "CALIBOOK_DATA"


class DataNotFoundError(FileNotFoundError):
    """A dataset is in none of the places searched and could not be downloaded.

    Used in: notebooks/civilcomments.
    """


def shared_data_dir() -> Path:
    """``../shared/data`` relative to the repository root."""
    return repo_root().parent / "shared" / "data"


def local_data_cache() -> Path:
    """Where downloaded or prepared data is kept between runs."""
    path = cache_dir() / "data"
    path.mkdir(parents=True, exist_ok=True)
    return path


def candidate_roots(explicit: str | os.PathLike[str] | None = None) -> list[tuple[str, Path]]:
    """The data roots in search order, each with a label for error messages."""
    roots: list[tuple[str, Path]] = []
    if explicit not in (None, ""):  # "" is a notebook's "search as usual" (data_dir: str = "")
        roots.append(("explicit argument", Path(explicit)))
    if os.environ.get(DATA_ENV):
        roots.append((f"${DATA_ENV}", Path(os.environ[DATA_ENV])))
    roots.append(("../shared/data", shared_data_dir()))
    roots.append(("local cache", local_data_cache()))
    return roots


def hub_offline() -> bool:
    """True when the HF hub is switched off (``HF_HUB_OFFLINE``/``HF_DATASETS_OFFLINE``)."""
    flags = (os.environ.get("HF_HUB_OFFLINE", ""), os.environ.get("HF_DATASETS_OFFLINE", ""))
    return any(f.lower() in {"1", "true", "yes", "on"} for f in flags)


def locate(
    dataset: str,
    relpath: str,
    explicit: str | os.PathLike[str] | None = None,
    download: Callable[[Path], Path] | None = None,
    how_to_get: str = "",
) -> Path:
    """Return the path of ``relpath`` (a file or folder) for ``dataset``.

    ``explicit`` may point at the file itself or at a data root holding ``relpath``. ``download``,
    if given, is called with the local cache folder and must return the downloaded path; its
    failure (offline, no such file) is reported together with the places searched.
    """
    tried: list[str] = []
    for label, root in candidate_roots(explicit):
        paths = [root / relpath]
        if label == "explicit argument":
            paths.append(root)  # the explicit argument may name the file or folder itself
        for path in paths:
            if path.exists():
                return path
        tried.append(f"{label}: {root / relpath}")
    reason = ""
    if download is not None:
        if hub_offline():
            reason = "download skipped: HF_HUB_OFFLINE/HF_DATASETS_OFFLINE is set"
        else:
            try:
                return download(local_data_cache())
            except Exception as err:  # noqa: BLE001 - any failure becomes part of the message
                reason = f"download failed: {type(err).__name__}: {err}"
    lines = [f"dataset {dataset!r} not found ({relpath}).", "Looked in:"]
    lines += [f"  - {t}" for t in tried]
    if reason:
        lines.append(reason)
    lines.append(
        "How to get it: "
        + (how_to_get or f"put it under one of the folders above, or set {DATA_ENV} to a folder holding {relpath}.")
    )
    raise DataNotFoundError("\n".join(lines))
