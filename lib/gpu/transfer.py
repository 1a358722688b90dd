"""Results that travel: a window's published records out in one archive, and back into ``results/``.

* :func:`export` writes the records a call published (with their artifacts) into one ``.tgz`` laid
  out as ``<page>/<group>/<key>.json``: what comes back from a GPU machine in one file.
* :func:`import_results` takes such an archive (or a folder laid out the same way) into
  ``results/``, after checking every record against today's plan (:mod:`lib.gpu.queue`): checksum,
  artifact hashes, plan id, config and code version; one bad record and nothing is copied.
"""

from __future__ import annotations

import shutil
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lib.config import results_dir
from lib.engine.runs import atomic_write, read_record, sha256_file
from lib.engine.versions import code_version, made_by_current_code

__all__ = ["export", "import_results"]


def export(paths: Sequence[Path], archive: Path) -> int:
    """Write the published records ``paths`` and their artifacts into ``archive`` (a .tgz laid out as
    ``<page>/<group>/<key>.json``, what ``--import`` takes); return the number of records."""
    from lib.config import results_dir

    root = results_dir()
    archive.parent.mkdir(parents=True, exist_ok=True)
    tmp = archive.with_name(archive.name + ".part")
    records = sorted({p for p in paths if p.suffix == ".json" and p.exists()})
    with tarfile.open(tmp, "w:gz") as tar:
        for rec in records:
            for f in sorted(rec.parent.glob(f"{rec.stem}.*npz")) + [rec]:
                tar.add(f, arcname=str(f.relative_to(root)))
    tmp.replace(archive)
    return len(records)


def _folder_of(source: Path) -> tuple[Path, tempfile.TemporaryDirectory[str] | None]:
    """The folder of records to import: ``source`` itself, or a ``.tgz``/``.tar`` unpacked into a
    temporary folder (refusing members outside it)."""
    if source.is_file() and tarfile.is_tarfile(source):
        tmp = tempfile.TemporaryDirectory(prefix="calibook-import-")
        with tarfile.open(source) as tar:
            tar.extractall(tmp.name, filter="data")
        return Path(tmp.name), tmp
    if not source.is_dir():
        raise ValueError(f"import: {source} is neither a folder nor a .tgz archive of results")
    return source, None


def import_results(folder: Path, scale: str = "paper") -> list[Path]:
    """Copy results produced by this project's queue elsewhere (``<page>/<group>/<key>.json`` with
    their ``.npz``, in a folder or a ``.tgz`` written by ``--export``) into ``results/``. Each record must
    verify (checksum, artifact hashes), carry a queue plan id, and match today's plan: same config
    for that id and the current code version; otherwise ``ValueError`` names the file and the
    reason, and nothing is copied. An empty source, or one laid out one level off, is refused."""
    source = Path(folder)
    if not source.exists():
        raise ValueError(f"import: {source} does not exist")
    if source.resolve() == results_dir().resolve():
        raise ValueError(f"import: {source} is results/ itself; pass the folder or archive brought back")
    root, tmp = _folder_of(source)
    try:
        return _import_from(root, source, scale)
    finally:
        if tmp is not None:
            tmp.cleanup()


def _import_from(folder: Path, source: Path, scale: str) -> list[Path]:
    paths = sorted(folder.glob("*/*/*.json"))
    if not paths:
        deeper = sorted(folder.glob("*/*/*/*.json"))
        hint = (
            (
                f"; its records lie one level deeper (under {deeper[0].parents[2].relative_to(folder)}/): "
                "pass that folder"
            )
            if deeper
            else ""
        )
        raise ValueError(f"import: {source} holds no records laid out as <page>/<group>/<key>.json{hint}")
    from lib.gpu.queue import PAGES, matches, plan

    today = {it.id: it for it in plan(PAGES, scale)}
    accepted: list[tuple[Path, dict[str, Any]]] = []
    for path in paths:
        rec = read_record(path)
        if rec is None:
            raise ValueError(f"{path.relative_to(folder)}: damaged or unsigned record; not imported")
        qid = (rec.get("queue") or {}).get("id")
        if qid not in today:
            raise ValueError(
                f"{path.relative_to(folder)}: not a run of today's plan (id {qid!r}); a foreign or renamed run"
            )
        if not made_by_current_code(rec):
            raise ValueError(
                f"{path.relative_to(folder)}: stale: made by code {rec.get('code_fingerprint')} "
                f"(version {rec.get('version')}) of {rec['group']!r}, not accepted for today's version "
                f"{code_version(rec['group'])} in lib/engine/versions.json"
            )
        if not matches(today[qid], rec):
            raise ValueError(f"{path.relative_to(folder)}: its config differs from today's config of {qid}")
        for name, meta in (rec.get("artifacts") or {}).items():
            art = path.with_name(f"{rec['key']}.{name}.npz")
            if not art.exists() or sha256_file(art) != meta["sha256"]:
                raise ValueError(f"{art.relative_to(folder)}: missing or does not match the record's SHA-256")
        accepted.append((path, rec))
    copied = []
    for path, rec in accepted:
        out = results_dir() / rec["queue"]["page"] / rec["group"]
        for f in sorted(path.parent.glob(f"{rec['key']}.*npz")) + [path]:  # the record last
            atomic_write(out / f.name, lambda tmp, f=f: shutil.copyfile(f, tmp))
            copied.append(out / f.name)
    return copied
