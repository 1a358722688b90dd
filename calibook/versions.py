"""Code versions of the run groups: the cache follows the live code, committed results follow versions.json.

Each group of runs (:class:`calibook.runs.Run`) has an integer version and a fingerprint of the code
that determines its results, computed, never listed: the modules of lib that make the group's runs (those
calling the seam's ``cached_run(GROUP, ...)`` or ``open_run(GROUP, ...)``, :mod:`lib.engine.cache`, :func:`run_makers`) and everything they import
within lib, at the top or inside a function (:func:`group_modules`, :mod:`calibook.imports`). A
module's fingerprint hashes its syntax tree without docstrings, those of constants included (editing
prose changes nothing); a group's combines those of its modules, so an edit of one module changes
exactly the groups whose runs import it, and a module a run path starts to import counts from then on. The one module left out is
the seam itself, :mod:`lib.engine.cache` (the store behind it, :mod:`calibook.runs`, is not in lib): it
stores results and makes none; a change of what it stores changes its ``RECORD_FORMAT``, part of every key.

Two rules keep results honest:

* **The local cache follows the live code.** A run's cache folder is keyed by its config, the group's
  version *and the live fingerprint* (:func:`fingerprint`), so any edit of code a group depends on
  (say ``PROB_CLAMP`` in ``lib/moe/heads.py``) recomputes that group's runs the next time they are asked for,
  without anyone bumping anything; groups whose code did not change keep their cache.
* **Committed results (``results/``, paper-scale GPU runs) are kept across refactors.**
  ``versions.json`` beside this file records, per group, the version and the fingerprints *accepted*
  for it: code states known to give the same results. A committed record is used only when both its
  own fingerprint and the live one are accepted for the group's version; otherwise it is ignored
  with a warning (and the run is recomputed locally where training is allowed). After a change that
  cannot alter results (a refactor), record the new fingerprint as accepted; after one that does,
  start a new version (every committed run of the group is then redone by the queue)::

      python -m calibook.versions              # refactor: accept today's fingerprints
      python -m calibook.versions --bump GROUP # results change: new version, only today's accepted

A unit test fails while a group's live fingerprint is not accepted, so the choice is made at commit
time; until then nothing stale is ever served (the cache is keyed by the live code, committed results
are ignored).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from calibook import imports

VERSIONS_FILE = Path(__file__).with_name("versions.json")


def _recorded() -> dict[str, dict[str, Any]]:
    """``versions.json``: per group its ``version``, the ``accepted`` fingerprints and the ``modules``."""
    return json.loads(VERSIONS_FILE.read_text()) if VERSIONS_FILE.exists() else {}


def code_version(group: str) -> int:
    """The recorded version of ``group`` (0 for a group without code of its own, e.g. in tests)."""
    entry = _recorded().get(group)
    return int(entry["version"]) if entry else 0


def accepted_fingerprints(group: str) -> tuple[str, ...]:
    """The fingerprints recorded as giving the results of ``group``'s current version."""
    entry = _recorded().get(group) or {}
    return tuple(entry.get("accepted", ()))


def made_by_current_code(record: Mapping[str, Any]) -> bool:
    """Whether a run ``record`` (with ``group``, ``version`` and, when written by this engine,
    ``code_fingerprint``) was made by code accepted for its group's current version."""
    group = record.get("group")
    if not isinstance(group, str) or record.get("version") != code_version(group):
        return False
    made_by = record.get("code_fingerprint")
    return made_by is None or made_by in accepted_fingerprints(group)


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    """The tree without its string statements: docstrings and the attribute docstrings below
    constants (prose that does nothing when the code runs)."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body:
            code = [
                s
                for s in body
                if not (
                    isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)
                )
            ]
            node.body = code or [ast.Pass()]  # type: ignore[attr-defined]
    return tree


def canonical(node: object) -> str:
    """A syntax tree written out the same on every Python version: node names and fields, leaving
    out fields that are ``None`` or empty (``ast.dump`` differs between 3.11, 3.12 and 3.13, e.g.
    3.12's empty ``type_params``, so a record made on a lent GPU machine's Python would otherwise
    never match the code here)."""
    if isinstance(node, ast.AST):
        fields = (f"{k}={canonical(v)}" for k, v in ast.iter_fields(node) if v is not None and v != [])
        return f"{type(node).__name__}({','.join(fields)})"
    if isinstance(node, list):
        return "[" + ",".join(canonical(x) for x in node) + "]"
    return repr(node)


_BY_SOURCE: dict[str, str] = {}  # SHA-256 of a module's bytes -> its fingerprint (parsing is the cost)
_TABLES: dict[tuple[Path, str], dict[str, tuple[tuple[str, ...], str]]] = {}  # (root, tree digest) -> groups
_MAKERS = ("cached_run", "open_run")  # the two ways lib asks the run store for a run of a group
_RUNS = "lib.engine.cache"  # the seam to the run store: it stores results, makes none (RECORD_FORMAT)


def module_fingerprint(module: str, root: Path | None = None) -> str:
    """SHA-256 (16 hex digits) of a module's syntax tree without docstrings or comments, read from
    the file as it is now (an edit made while Python runs counts at once)."""
    source = imports.module_file(module, root).read_bytes()
    digest = hashlib.sha256(source).hexdigest()
    if digest not in _BY_SOURCE:
        tree = _strip_docstrings(ast.parse(source))
        _BY_SOURCE[digest] = hashlib.sha256(canonical(tree).encode()).hexdigest()[:16]
    return _BY_SOURCE[digest]


def _constant(module: str, name: str, root: Path | None) -> str | None:
    """The string a top-level ``name = "..."`` of ``module`` (or one it imports) holds, else None."""
    for node in imports.parse(module, root).body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        value = getattr(node, "value", None)
        if any(isinstance(t, ast.Name) and t.id == name for t in targets) and isinstance(value, ast.Constant):
            return value.value if isinstance(value.value, str) else None
    source, attr = imports.bindings(module, root).get(name, ("", None))
    return _constant(source, attr, root) if attr else None


def _group_of(module: str, call: ast.Call, root: Path | None) -> str | None:
    """The group a call of ``cached_run``/``Run`` names: a literal or a module constant."""
    arg = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "group"), None)
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.Name):
        return _constant(module, arg.id, root)
    if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name):
        source, attr = imports.bindings(module, root).get(arg.value.id, ("", ""))
        return _constant(source, arg.attr, root) if source and attr is None else None
    return None


def _maker_calls(module: str, root: Path | None) -> list[ast.Call]:
    """The calls of the seam's (:mod:`lib.engine.cache`) ``cached_run`` or ``open_run`` in ``module``."""
    bound = imports.bindings(module, root)
    makers = {n for n, (m, a) in bound.items() if m == _RUNS and a in _MAKERS}
    aliases = {n for n, (m, a) in bound.items() if m == _RUNS and a is None}
    return [
        node
        for node in ast.walk(imports.parse(module, root))
        if isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Name) and node.func.id in makers)
            or (
                isinstance(node.func, ast.Attribute)
                and node.func.attr in _MAKERS
                and getattr(node.func.value, "id", None) in aliases
            )
        )
    ]


def run_makers(root: Path | None = None) -> dict[str, tuple[str, ...]]:
    """group -> the modules of lib that make its runs, found in the source: those that call
    :func:`lib.engine.cache.cached_run` or :func:`lib.engine.cache.open_run` with the group as a string
    literal or a module constant. A call whose group cannot be read that way raises."""
    out: dict[str, set[str]] = {}
    for module in imports.lib_modules(root):
        if module == _RUNS or _RUNS not in imports.imported(module, root):
            continue
        for node in _maker_calls(module, root):
            group = _group_of(module, node, root)
            if group is None:
                raise ValueError(
                    f"{module}, line {node.lineno}: the group of this run is not a string literal or a module "
                    "constant, so its code cannot be fingerprinted"
                )
            out.setdefault(group, set()).add(module)
    return {g: tuple(sorted(m)) for g, m in sorted(out.items())}


def _table(root: Path | None = None) -> dict[str, tuple[tuple[str, ...], str]]:
    """group -> (the import closure of the modules that make its runs, its fingerprint), for the code
    under ``root`` as it is now (recomputed only when a file of lib changed)."""
    base = (root or imports.SOURCE_ROOT).resolve()
    files = sorted((base / imports.PACKAGE).rglob("*.py"))
    tree = hashlib.sha256(b"".join(str(p).encode() + hashlib.sha256(p.read_bytes()).digest() for p in files))
    key = (base, tree.hexdigest())
    if key not in _TABLES:
        table = {}
        for group, makers in run_makers(base).items():
            modules = imports.closure(makers, base, skip=(_RUNS,))
            parts = [f"{m}:{module_fingerprint(m, base)}" for m in modules]
            table[group] = (modules, hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16])
        _TABLES.clear()
        _TABLES[key] = table
    return _TABLES[key]


def group_modules(group: str, root: Path | None = None) -> tuple[str, ...]:
    """The modules whose code determines ``group``'s results: the import closure (within lib) of
    the modules that make its runs (:func:`run_makers`, :func:`calibook.imports.closure`)."""
    table = _table(root)
    if group not in table:
        raise ValueError(f"group: unknown {group!r}; known: {sorted(table)}")
    return table[group][0]


def fingerprint(group: str, root: Path | None = None) -> str:
    """The combined fingerprint of the live code of ``group`` (every module of :func:`group_modules`)."""
    group_modules(group, root)
    return _table(root)[group][1]


def live_fingerprint(group: str) -> str:
    """:func:`fingerprint` of a known group, ``""`` for a group without code of its own (tests)."""
    return _table()[group][1] if group in _table() else ""


def stale_groups() -> list[str]:
    """Groups whose live fingerprint is not accepted in ``versions.json``."""
    return [g for g in _table() if fingerprint(g) not in accepted_fingerprints(g)]


def update(bump: tuple[str, ...] = ()) -> dict[str, dict[str, object]]:
    """Accept today's fingerprints; a group in ``bump`` starts a new version with only today's."""
    rec = _recorded()
    table = _table()
    for g in bump:
        if g not in table:
            raise ValueError(f"bump: unknown group {g!r}; known: {sorted(table)}")
    out: dict[str, dict[str, object]] = {}
    for g, (modules, live) in table.items():
        old = rec.get(g, {})
        version = int(old.get("version", 1)) + (1 if g in bump else 0)
        accepted = [] if g in bump else list(old.get("accepted", []))
        if live not in accepted:
            accepted.append(live)
        out[g] = {"version": version, "accepted": accepted, "modules": list(modules)}
    VERSIONS_FILE.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line: accept today's code fingerprints, optionally starting new group versions."""
    ap = argparse.ArgumentParser(prog="python -m calibook.versions", description=__doc__.split("\n")[0])
    ap.add_argument("--bump", nargs="*", default=[], metavar="GROUP", help="groups whose results change")
    args = ap.parse_args(argv)
    stale = stale_groups()
    out = update(tuple(args.bump))
    for g, e in out.items():
        flag = " (bumped)" if g in args.bump else (" (code changed, accepted for this version)" if g in stale else "")
        print(f"{g:14s} v{e['version']}{flag}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
