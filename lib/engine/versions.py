"""Code versions of the run groups: part of every run key, so a code change never returns a stale result.

Each group of runs (:class:`lib.engine.runs.Run`) has an integer version and the list of modules whose
code determines its results. ``versions.json`` beside this file records a fingerprint of that code
(its syntax tree without docstrings, so editing prose changes nothing). A unit test recomputes the
fingerprints: when the code of a group changed, it fails and asks to either bump the group's
version (results change: every cached and committed run of the group is recomputed) or, for a change
that cannot alter results (a refactor), to record the new fingerprint as it is. Both are done with::

    python -m lib.engine.versions [--bump GROUP ...]
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.util
import json
from pathlib import Path

_ENGINE = ("lib.engine.loop", "lib.engine.device", "lib.augment", "lib.backbones")

#: group -> modules whose code determines the group's results.
GROUP_MODULES: dict[str, tuple[str, ...]] = {
    "moe": (*_ENGINE, "lib.text_backbone", "lib.engine.stack", "lib.moe_train", "lib.moe_methods", "lib.moe_eval",
            "lib.moe", "lib.robust", "lib.fgr", "lib.jpeg", "lib.calibrate", "lib.mocae", "lib.metrics"),
    "l2d_gaussians": (*_ENGINE, "lib.experiments.l2d", "lib.experiments.l2d_gaussians", "lib.experiments.l2d_cifar10",
                      "lib.experiments.l2d_results", "lib.l2d", "lib.synthetic_experts", "lib.gaussian_mixture",
                      "lib.metrics"),
    "l2d_cifar10": (*_ENGINE, "lib.experiments.l2d", "lib.experiments.l2d_gaussians", "lib.experiments.l2d_cifar10",
                    "lib.experiments.l2d_results", "lib.experiments.image_training", "lib.l2d", "lib.synthetic_experts",
                    "lib.gaussian_mixture", "lib.metrics"),
    "rr_backbone": (*_ENGINE, "lib.experiments.image_training"),
    "rr_losses": (*_ENGINE, "lib.experiments.reweighted", "lib.experiments.image_training", "lib.reweighted",
                  "lib.reweighted_weights", "lib.ece_kde", "lib.calibrate", "lib.mocae", "lib.metrics"),
}
VERSIONS_FILE = Path(__file__).with_name("versions.json")


def _recorded() -> dict[str, dict[str, object]]:
    if not VERSIONS_FILE.exists():
        return {}
    return json.loads(VERSIONS_FILE.read_text())


def code_version(group: str) -> int:
    """The recorded version of ``group`` (0 for a group without code of its own, e.g. in tests)."""
    entry = _recorded().get(group)
    return int(entry["version"]) if entry else 0


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(getattr(body[0], "value", None), ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]
    return tree


def module_fingerprint(module: str) -> str:
    """SHA-256 (16 hex digits) of a module's syntax tree without docstrings or comments."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ValueError(f"module: {module!r} not found")
    tree = _strip_docstrings(ast.parse(Path(spec.origin).read_text()))
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()[:16]


def fingerprint(group: str) -> str:
    """The combined fingerprint of the code of ``group``."""
    if group not in GROUP_MODULES:
        raise ValueError(f"group: unknown {group!r}; known: {sorted(GROUP_MODULES)}")
    parts = [f"{m}:{module_fingerprint(m)}" for m in GROUP_MODULES[group]]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def stale_groups() -> list[str]:
    """Groups whose code differs from the fingerprint recorded in ``versions.json``."""
    rec = _recorded()
    return [g for g in GROUP_MODULES if rec.get(g, {}).get("fingerprint") != fingerprint(g)]


def update(bump: tuple[str, ...] = ()) -> dict[str, dict[str, object]]:
    """Record today's fingerprints, bumping the versions of the groups in ``bump``."""
    rec = _recorded()
    for g in bump:
        if g not in GROUP_MODULES:
            raise ValueError(f"bump: unknown group {g!r}; known: {sorted(GROUP_MODULES)}")
    out = {}
    for g in GROUP_MODULES:
        version = int(rec.get(g, {}).get("version", 1)) + (1 if g in bump else 0)
        out[g] = {"version": version, "fingerprint": fingerprint(g), "modules": list(GROUP_MODULES[g])}
    VERSIONS_FILE.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line: record the code fingerprints, optionally bumping group versions."""
    ap = argparse.ArgumentParser(prog="python -m lib.engine.versions", description=__doc__.split("\n")[0])
    ap.add_argument("--bump", nargs="*", default=[], metavar="GROUP", help="groups whose results change")
    args = ap.parse_args(argv)
    stale = stale_groups()
    out = update(tuple(args.bump))
    for g, e in out.items():
        flag = " (bumped)" if g in args.bump else (" (code changed, version kept)" if g in stale else "")
        print(f"{g:14s} v{e['version']}{flag}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
