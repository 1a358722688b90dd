"""Results that travel: a call's published records out in archives, and back into ``results/``.

* :func:`export` writes the records a call published (with their artifacts) into ``.tgz`` archives
  laid out as ``<page>/<group>/<key>.json``, each under the 16 MiB a file may bring back from a GPU
  machine (``results.tgz``, then ``results-2.tgz``, ...). A call that published nothing writes an
  empty archive: a normal result.
* :func:`import_results` takes such archives (or folders laid out the same way, or the folder a call
  brought back, holding its archives) into ``results/``, after checking every record against
  today's plan (:mod:`calibook.results`): checksum, artifact hashes, scale, plan id, config and code
  version; one bad record and nothing is copied.
"""

from __future__ import annotations

import filecmp
import shutil
import tarfile
import tempfile
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from calibook.artifacts import results_dir
from lib.engine.plan import matches
from calibook.runs import atomic_write, read_record, sha256_file
from calibook.versions import code_version, made_by_current_code
from calibook.results import PAGES, plan

#: Largest archive a call writes (a file brought back from the machine may have 16 MiB), and the
#: most archives (8 files come back: the log and the benchmark beside them).
ARCHIVE_BYTES = 15 * 2**20
MAX_ARCHIVES = 6

__all__ = ["ARCHIVE_BYTES", "MAX_ARCHIVES", "export", "import_results", "record_bytes"]


def _files(record: Path) -> list[Path]:
    """A published record's files: its artifacts, then the record."""
    return sorted(record.parent.glob(f"{record.stem}.*npz")) + [record]


def record_bytes(paths: Sequence[Path]) -> int:
    """Bytes the published records ``paths`` (and their artifacts) take in an archive, at most."""
    return sum(f.stat().st_size for p in {p for p in paths if p.suffix == ".json" and p.exists()} for f in _files(p))


def export(paths: Sequence[Path], archive: Path, max_bytes: int = ARCHIVE_BYTES) -> list[Path]:
    """Write the published records ``paths`` and their artifacts into ``archive`` (a .tgz laid out as
    ``<page>/<group>/<key>.json``, what ``--import`` takes), starting ``<stem>-2.tgz``, ``-3``, ...
    whenever the next record would take one past ``max_bytes``; returns the archives written (one,
    empty, when nothing was published)."""
    root = results_dir()
    records = sorted({p for p in paths if p.suffix == ".json" and p.exists()})
    groups: list[list[Path]] = [[]]
    size = 0
    for rec in records:
        n = record_bytes([rec])
        if n > max_bytes:
            raise ValueError(f"{rec.relative_to(root)}: {n / 2**20:.1f} MiB, more than an archive may hold")
        if groups[-1] and size + n > max_bytes:
            groups.append([])
            size = 0
        groups[-1].append(rec)
        size += n
    if len(groups) > MAX_ARCHIVES:
        raise ValueError(f"export: {len(records)} records need {len(groups)} archives, more than {MAX_ARCHIVES}")
    archive.parent.mkdir(parents=True, exist_ok=True)
    out = []
    for i, group in enumerate(groups):
        path = archive if i == 0 else archive.with_name(f"{archive.name.removesuffix('.tgz')}-{i + 1}.tgz")
        tmp = path.with_name(path.name + ".part")
        with tarfile.open(tmp, "w:gz") as tar:
            for rec in group:
                for f in _files(rec):
                    tar.add(f, arcname=str(f.relative_to(root)))
        tmp.replace(path)
        out.append(path)
    return out


def _folders(source: Path, stack: ExitStack) -> list[Path]:
    """The folders of records ``source`` holds: itself, an archive unpacked into a temporary folder
    (refusing members outside it), or, for a folder a call brought back, each archive in it."""
    if source.is_file() and tarfile.is_tarfile(source):
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="calibook-import-")))
        try:
            with tarfile.open(source) as tar:
                tar.extractall(tmp, filter="data")
        except (EOFError, OSError, tarfile.ReadError) as err:  # e.g. cut short on its way back
            raise ValueError(f"import: {source} is damaged ({err}); bring it back again") from err
        return [tmp]
    if not source.is_dir():
        raise ValueError(f"import: {source} is neither a folder nor a .tgz archive of results")
    archives = sorted(source.glob("*.tgz"))
    if archives and not list(source.glob("*/*/*.json")):
        return [f for a in archives for f in _folders(a, stack)]
    return [source]


def _records(folder: Path, source: Path) -> list[Path]:
    """The records in ``folder`` laid out as ``<page>/<group>/<key>.json``; a folder laid out
    otherwise (records one level deeper, record files at its top) is refused naming what is there."""
    paths = sorted(folder.glob("*/*/*.json"))
    if paths:
        return paths
    deeper = sorted(folder.glob("*/*/*/*.json"))
    if deeper:
        raise ValueError(
            f"import: {source} holds no records laid out as <page>/<group>/<key>.json; they lie one level "
            f"deeper (under {deeper[0].parents[2].relative_to(folder)}/): pass that folder"
        )
    top = sorted(p.name for p in folder.glob("*.json"))
    if top:
        raise ValueError(
            f"import: {source} holds {', '.join(top)} at its top, not records laid out as "
            "<page>/<group>/<key>.json (nor .tgz archives of them)"
        )
    return []


def import_results(sources: Path | Sequence[Path], scale: str = "paper") -> list[Path]:
    """Copy results produced by this project's queue elsewhere into ``results/``: ``.tgz`` archives
    written by ``--export``, folders laid out as ``<page>/<group>/<key>.json`` with their ``.npz``,
    or the folder a call brought back (its archives). Each record must verify (checksum, artifact
    hashes), have been made at ``scale``, carry a plan id of today's plan with the same config, and
    be made by the current code version; otherwise ``ValueError`` names the file and the reason, and
    nothing is copied. Returns the files written: files ``results/`` already holds, byte for byte,
    are left as they are, so a second import of the same runs writes none; sources without records
    (an empty archive) import 0 records."""
    sources = [Path(sources)] if isinstance(sources, (str, Path)) else [Path(s) for s in sources]
    for source in sources:
        if not source.exists():
            raise ValueError(f"import: {source} does not exist")
        if source.resolve() == results_dir().resolve():
            raise ValueError(f"import: {source} is results/ itself; pass the folder or archive brought back")
    with ExitStack() as stack:
        found = [(f, p, s) for s in sources for f in _folders(s, stack) for p in _records(f, s)]
        if not found:
            return []
        recs = [(folder, path, read_record(path)) for folder, path, _source in found]
        named = {((rec or {}).get("queue") or {}).get("page") for _f, _p, rec in recs}
        today = {it.id: it for it in plan([p for p in PAGES if p in named], scale)}  # only the pages in
        accepted = [(path, _check(path, folder, rec, today, scale)) for folder, path, rec in recs]
        copied = []
        for path, rec in accepted:
            out = results_dir() / rec["queue"]["page"] / rec["group"]
            for f in _files(path):  # the record last; a file results/ holds already, byte for byte, stays
                if not (out / f.name).exists() or not filecmp.cmp(f, out / f.name, shallow=False):
                    atomic_write(out / f.name, lambda tmp, f=f: shutil.copyfile(f, tmp))
                    copied.append(out / f.name)
        return copied


def _check(path: Path, folder: Path, rec: dict[str, Any] | None, today: dict[str, Any], scale: str) -> dict[str, Any]:
    """The record ``rec`` read at ``path`` when it may be imported at ``scale``; else ``ValueError`` saying why."""
    name = path.relative_to(folder)
    if rec is None:
        raise ValueError(f"{name}: damaged or unsigned record; not imported")
    made_at = (rec.get("queue") or {}).get("scale")
    if made_at is not None and made_at != scale:
        raise ValueError(f"{name}: made at scale {made_at!r}, not {scale!r}; import it with --scale {made_at}")
    qid = (rec.get("queue") or {}).get("id")
    if qid not in today:
        raise ValueError(f"{name}: not a run of today's plan at scale {scale!r} (id {qid!r}); a foreign or renamed run")
    if not made_by_current_code(rec):
        raise ValueError(
            f"{name}: stale: made by code {rec.get('code_fingerprint')} (version {rec.get('version')}) of "
            f"{rec['group']!r}, not accepted for today's version {code_version(rec['group'])} in calibook/versions.json"
        )
    if not matches(today[qid], rec):
        raise ValueError(f"{name}: its config differs from today's config of {qid}")
    for art_name, meta in (rec.get("artifacts") or {}).items():
        art = path.with_name(f"{rec['key']}.{art_name}.npz")
        if not art.exists() or sha256_file(art) != meta["sha256"]:
            raise ValueError(f"{art.relative_to(folder)}: missing or does not match the record's SHA-256")
    return rec
