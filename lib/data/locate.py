"""Finding real data on disk, in one fixed order, with an error that says how to get it.

Search order: an explicit argument (then the only place), ``$CALIBOOK_DATA``, ``../shared/data``, the
local cache (``<cache>/data``), then the official download when online. A place counts only when it
holds what the loader needs (non-empty), so a half-copied folder does not shadow a complete copy.
:class:`DataNotFoundError` names the dataset, every place searched and how to get the data (the book's
data page lists every dataset); a file found but unreadable raises :class:`DamagedDataError`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import zipfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from lib.config import cache_dir, repo_root

DATA_ENV = "CALIBOOK_DATA"
DATA_PAGE = "the book's data page (book/data.md; `Data` in the HTML book)"


class DataNotFoundError(FileNotFoundError):
    """A dataset is in none of the places searched and could not be downloaded."""


class DamagedDataError(ValueError):
    """A data file was found but cannot be read (empty, truncated, not the expected format)."""


def sha256_file(path: Path) -> str:
    """SHA-256 of a file's bytes (hex)."""
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def shared_data_dir() -> Path:
    """``../shared/data`` relative to the repository root."""
    return repo_root().parent / "shared" / "data"


def local_data_cache() -> Path:
    """Where downloaded or prepared data is kept between runs."""
    path = cache_dir() / "data"
    path.mkdir(parents=True, exist_ok=True)
    return path


def candidate_roots() -> list[tuple[str, Path]]:
    """The data roots searched without an explicit one, in order, each with a label for messages
    (never a home path)."""
    env = [(f"${DATA_ENV}", Path(os.environ[DATA_ENV]))] if os.environ.get(DATA_ENV) else []
    return [*env, ("../shared/data", shared_data_dir()), ("local cache", local_data_cache())]


def _missing(path: Path, needs: Sequence[str]) -> str:
    """What ``path`` lacks for the loader ("" when it is usable): the path itself, a ``needs``
    pattern (glob, relative to ``path``; a file holds none) without a non-empty match, or (without
    ``needs``) a non-empty file or folder."""
    if not path.exists():
        return "absent"
    for pattern in needs:
        if next((p for p in path.glob(pattern) if p.is_dir() or p.stat().st_size > 0), None) is None:
            return f"holds no {pattern}"
    if path.is_file():
        return "" if path.stat().st_size > 0 else "empty file"
    return "" if needs or any(path.iterdir()) else "empty folder"


def locate(
    dataset: str,
    relpath: str,
    explicit: str | os.PathLike[str] | None = None,
    download: Callable[[Path], Path] | None = None,
    how_to_get: str = "",
    needs: Sequence[str] = (),
) -> Path:
    """The path of ``relpath`` (a file or folder) for ``dataset``, in the module's search order:
    ``explicit`` (the file itself or a data root; then the only place), the data roots, then
    ``download(cache folder)``. A place counts when it holds ``needs`` (globs below ``relpath``)."""
    if explicit not in (None, ""):  # the caller's choice, used or refused ("": a notebook's "search as usual")
        root = Path(explicit)
        if not (problem := _missing(root / relpath, needs)):
            return root / relpath
        if not _missing(root, needs):
            return root
        what = f"holds no usable copy of dataset {dataset!r} ({root / relpath}: {problem})"
        if not root.exists():
            what = f"does not exist (dataset {dataset!r})"
        raise DataNotFoundError(
            f"data root {explicit}: {what}; give a folder "
            f"holding {relpath}, or none to search ${DATA_ENV}, ../shared/data and the cache. "
            f"How to get it: {how_to_get or DATA_PAGE}"
        )
    tried = [] if os.environ.get(DATA_ENV) else [f"${DATA_ENV}: not set"]
    for label, root in candidate_roots():
        if not (problem := _missing(root / relpath, needs)):
            return root / relpath
        tried.append(f"{label}: {root / relpath} ({problem})")
    reason = ""
    if download is not None:
        flags = (os.environ.get(v, "").lower() for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))
        if any(f in {"1", "true", "yes", "on"} for f in flags):
            reason = "download skipped: HF_HUB_OFFLINE/HF_DATASETS_OFFLINE is set"
        else:
            try:
                return download(local_data_cache())
            except Exception as err:  # noqa: BLE001 - any failure becomes part of the message
                reason = f"download failed: {type(err).__name__}: {err}"
    how = how_to_get or f"put it under one of the folders above, or set {DATA_ENV} to a folder holding {relpath}."
    lines = [f"dataset {dataset!r} not found ({relpath}).", "Looked in:", *(f"  - {t}" for t in tried), reason]
    lines += [f"How to get it: {how}", f"Every dataset, where to put it and where it comes from: {DATA_PAGE}."]
    raise DataNotFoundError("\n".join(line for line in lines if line))  # no line for an empty reason


def describe(path: str | os.PathLike[str]) -> str:
    """Where ``path`` was found, for a page: the search place's label and the path below it
    (``../shared/data/pacs``, ``$CALIBOOK_DATA/pacs``, ``local cache/...``), never a home path.
    """
    p = Path(path).resolve()
    for label, root in candidate_roots():
        with contextlib.suppress(ValueError, OSError):
            return f"{label}/{p.relative_to(root.resolve()).as_posix()}"
    return p.name


# Errors of the readers lib.data uses on a damaged file (pandas' errors are ValueErrors; a truncated zip or
# npz raises BadZipFile, a damaged pickle UnpicklingError).
READ_ERRORS = (OSError, EOFError, ValueError, KeyError, SyntaxError, zipfile.BadZipFile, pickle.UnpicklingError)


@contextlib.contextmanager
def reading(path: str | os.PathLike[str], how_to_get: str = "") -> Iterator[None]:
    """Turn a reader's failure on ``path`` (``with reading(path): pd.read_csv(path)``) into
    :class:`DamagedDataError` naming the file, the reader's complaint and ``how_to_get`` it again."""
    try:
        yield
    except DamagedDataError:
        raise  # an inner reading() already named the file
    except READ_ERRORS as err:
        hint = f" How to get it again: {how_to_get}" if how_to_get else f" See {DATA_PAGE}."
        raise DamagedDataError(
            f"{path}: the file is damaged or incomplete and cannot be read ({type(err).__name__}: {err}).{hint}"
        ) from err
