"""Code versions of the run groups: the cache follows the live code, committed results follow versions.json.

Each group of runs (:class:`lib.engine.runs.Run`) has an integer version and the list of modules whose
code determines its results (``GROUP_MODULES``). A module's fingerprint hashes its syntax tree without
docstrings (editing prose changes nothing); a group's fingerprint combines those of its modules, so
an edit of one module changes only the groups that list it.

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

      python -m lib.engine.versions              # refactor: accept today's fingerprints
      python -m lib.engine.versions --bump GROUP # results change: new version, only today's accepted

A unit test fails while a group's live fingerprint is not accepted, so the choice is made at commit
time; until then nothing stale is ever served (the cache is keyed by the live code, committed results
are ignored).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.util
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_ENGINE = ("lib.engine.loop", "lib.engine.device", "lib.data.augment", "lib.nets.backbones", "lib.nets.wrn")

#: group -> modules whose code determines the group's results.
GROUP_MODULES: dict[str, tuple[str, ...]] = {
    "moe": (
        *_ENGINE,
        "lib.nets.text",
        "lib.nets.lite0_split",
        "lib.engine.stack",
        "lib.moe.train",
        "lib.moe.config",
        "lib.moe.methods",
        "lib.moe.evaluate",
        "lib.moe.heads",
        "lib.moe.robust",
        "lib.moe.fgr",
        "lib.moe.jpeg",
        "lib.calibration.posthoc",
        "lib.moe.mocae",
        "lib.calibration.metrics",
    ),
    "l2d_gaussians": (
        *_ENGINE,
        "lib.l2d.experiment",
        "lib.l2d.gaussians",
        "lib.l2d.cifar10",
        "lib.l2d.results",
        "lib.l2d.surrogates",
        "lib.l2d.synthetic_experts",
        "lib.l2d.gaussian_mixture",
        "lib.calibration.metrics",
    ),
    "l2d_cifar10": (
        *_ENGINE,
        "lib.l2d.experiment",
        "lib.l2d.gaussians",
        "lib.l2d.cifar10",
        "lib.l2d.results",
        "lib.nets.image_training",
        "lib.l2d.surrogates",
        "lib.l2d.synthetic_experts",
        "lib.l2d.gaussian_mixture",
        "lib.calibration.metrics",
    ),
    "rr_backbone": (
        *_ENGINE,
        "lib.nets.image_training",
        "lib.nets.lite0_split",
        "lib.nets.lite0_tuning",
        "lib.data.features",
    ),
    "rr_losses": (
        *_ENGINE,
        "lib.rr.experiment",
        "lib.nets.image_training",
        "lib.rr.losses",
        "lib.rr.weights",
        "lib.calibration.ece_kde",
        "lib.calibration.posthoc",
        "lib.moe.mocae",
        "lib.calibration.metrics",
    ),
}
VERSIONS_FILE = Path(__file__).with_name("versions.json")


def _recorded() -> dict[str, dict[str, object]]:
    """``versions.json`` with every entry in today's form (``version``, ``accepted``, ``modules``); an
    entry of the older form (one ``fingerprint``) counts as that one fingerprint accepted."""
    if not VERSIONS_FILE.exists():
        return {}
    raw = json.loads(VERSIONS_FILE.read_text())
    out: dict[str, dict[str, object]] = {}
    for group, entry in raw.items():
        accepted = list(entry.get("accepted") or [])
        if entry.get("fingerprint") and entry["fingerprint"] not in accepted:
            accepted.append(entry["fingerprint"])
        out[group] = {
            "version": int(entry.get("version", 1)),
            "accepted": accepted,
            "modules": list(entry.get("modules", [])),
        }
    return out


def code_version(group: str) -> int:
    """The recorded version of ``group`` (0 for a group without code of its own, e.g. in tests)."""
    entry = _recorded().get(group)
    return int(entry["version"]) if entry else 0  # type: ignore[call-overload]


def accepted_fingerprints(group: str) -> tuple[str, ...]:
    """The fingerprints recorded as giving the results of ``group``'s current version."""
    entry = _recorded().get(group) or {}
    return tuple(entry.get("accepted", ()))  # type: ignore[arg-type]


def made_by_current_code(record: Mapping[str, Any]) -> bool:
    """Whether a run ``record`` (with ``group``, ``version`` and, when written by this engine,
    ``code_fingerprint``) was made by code accepted for its group's current version."""
    group = record.get("group")
    if not isinstance(group, str) or record.get("version") != code_version(group):
        return False
    made_by = record.get("code_fingerprint")
    return made_by is None or made_by in accepted_fingerprints(group)


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(getattr(body[0], "value", None), ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]
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


def module_fingerprint(module: str) -> str:
    """SHA-256 (16 hex digits) of a module's syntax tree without docstrings or comments, read from
    the file as it is now (an edit made while Python runs counts at once)."""
    if not isinstance(module, str) or not module:
        raise ValueError(f"module: expected a module name, got {module!r}")
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ValueError(f"module: {module!r} not found")
    source = Path(spec.origin).read_bytes()
    digest = hashlib.sha256(source).hexdigest()
    if digest not in _BY_SOURCE:
        tree = _strip_docstrings(ast.parse(source))
        _BY_SOURCE[digest] = hashlib.sha256(canonical(tree).encode()).hexdigest()[:16]
    return _BY_SOURCE[digest]


def fingerprint(group: str) -> str:
    """The combined fingerprint of the live code of ``group``."""
    if group not in GROUP_MODULES:
        raise ValueError(f"group: unknown {group!r}; known: {sorted(GROUP_MODULES)}")
    parts = [f"{m}:{module_fingerprint(m)}" for m in GROUP_MODULES[group]]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def live_fingerprint(group: str) -> str:
    """:func:`fingerprint` of a known group, ``""`` for a group without code of its own (tests)."""
    return fingerprint(group) if group in GROUP_MODULES else ""


def stale_groups() -> list[str]:
    """Groups whose live fingerprint is not accepted in ``versions.json``."""
    return [g for g in GROUP_MODULES if fingerprint(g) not in accepted_fingerprints(g)]


def update(bump: tuple[str, ...] = ()) -> dict[str, dict[str, object]]:
    """Accept today's fingerprints; a group in ``bump`` starts a new version with only today's."""
    rec = _recorded()
    for g in bump:
        if g not in GROUP_MODULES:
            raise ValueError(f"bump: unknown group {g!r}; known: {sorted(GROUP_MODULES)}")
    out: dict[str, dict[str, object]] = {}
    for g in GROUP_MODULES:
        old = rec.get(g, {})
        live = fingerprint(g)
        version = int(old.get("version", 1)) + (1 if g in bump else 0)  # type: ignore[call-overload]
        accepted = [] if g in bump else list(old.get("accepted", []))  # type: ignore[call-overload]
        if live not in accepted:
            accepted.append(live)
        out[g] = {"version": version, "accepted": accepted, "modules": list(GROUP_MODULES[g])}
    VERSIONS_FILE.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line: accept today's code fingerprints, optionally starting new group versions."""
    ap = argparse.ArgumentParser(prog="python -m lib.engine.versions", description=__doc__.split("\n")[0])
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
