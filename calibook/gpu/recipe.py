"""The recipe of a GPU session as data: what to run here and what the one call to the lent machine runs.

``results/README.md`` shows these steps (the block between its ``recipe`` markers is
:func:`render`'s text: ``python -m calibook.gpu.recipe`` rewrites it, and a test fails when the two
differ), the rehearsal test (``tests/unit/calibook/gpu/test_window_rehearsal.py``) runs them in order at smoke
scale, the call in a fresh folder holding only what travels, and the projection
(:mod:`calibook.gpu.projection`) counts the training minutes they leave per session.

A session is lent 15 device minutes in all (starts, idle time and every call), so it makes one call
on a fresh machine (the CUDA benchmark until this device's packs are measured, then training) and
a second one at once, while the machine is warm (30 s after a call), that trains in the minutes
left without a second start. Each call carries the tree (``results/`` included) and every chunk of
the data it trains on, so a second call that finds the machine gone still works on a fresh one.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from lib.config import repo_root

#: Device time a session is lent (all its calls, starts and idle time together), what a call costs
#: beside its command (a cold machine's start with the transfers: 33 s measured on the H200, and the
#: 30 s it is held after the call), and what a machine needs left to start at all.
SESSION_MINUTES = 15.0
START_MINUTES = 1.0
IDLE_MINUTES = 0.5
MIN_START_MINUTES = 4.0
#: What a training call spends before it trains: the interpreter and imports, unpacking the data,
#: decoding it and the engine's self-test (21 s measured on a cold H200; each call's log says).
SETUP_MINUTES = 0.5
#: What a call keeps free before its ``--minutes`` end (at most a fifth of them): evaluating and
#: publishing the last pack and writing the archive (:mod:`calibook.gpu.window` stops training there).
RESERVE_MINUTES = 1.5
#: The benchmark's limit inside the call (it saves after every measurement, so a cut keeps them, and
#: measures only what this device's file lacks: a benchmark cut here goes on in the next session;
#: bench/first_gpu.sh measures every pack size at once, the first lent GPU's call).
BENCH_SECONDS = 90
MARKERS = ("<!-- recipe: start (python -m calibook.gpu.recipe writes this block) -->", "<!-- recipe: end -->")

__all__ = [
    "AGAIN",
    "CALL",
    "SESSION",
    "Step",
    "at_scale",
    "readme_block",
    "render",
    "reserve_seconds",
    "training_minutes",
    "write_readme",
]


@dataclass(frozen=True)
class Step:
    """One step: a command ``here`` (the home machine, in the repository) or a ``call`` of the device
    tool (``timeout_s`` seconds at most, carrying the ignored paths ``carry`` beside the tree;
    ``warm``: on the machine the call before left warm)."""

    title: str
    command: str
    call: bool = False
    carry: tuple[str, ...] = ()
    timeout_s: int = 600
    warm: bool = False

    def minutes(self) -> float | None:
        """The ``--minutes`` a window command of this step is given (``None``: it trains nothing)."""
        found = re.search(r"--minutes (\S+)", self.command)
        return float(found.group(1)) if found else None

    def device_minutes(self) -> float:
        """Device time the step holds at most: the command's limit, the start (none when warm) and the
        warm hold."""
        return self.timeout_s / 60 + (0.0 if self.warm else START_MINUTES) + IDLE_MINUTES if self.call else 0.0


PACK = Step(
    "**Here, once** (and again after the data changed, or when the check below says so): the data of "
    "CIFAR-10H and Sensitivity as one compressed chunk sized beside the tree and `results/` as they are now.",
    "python -m calibook pack cifar10h",
)
CHECK = Step(
    "**Here, before the call**: what the call carries (tree, `results/` and the chunks) fits the 64 MiB "
    "a call takes, and every pack it carries is whole; otherwise it says what to do, and nothing is sent.",
    "python -m calibook paper --carry .packs/cifar10h",
)
CALL = Step(
    "**The call** (the first of a session): the CUDA benchmark of Vanilla's and FGR's steps, alone and "
    f"in packs of 8, 16 and 32 runs, eager and compiled (at most {BENCH_SECONDS} s; what this device has "
    "measured is skipped), then the machine's versions and data fingerprints, the self-test, and "
    "CIFAR-10H, then Sensitivity, in packs sized from the benchmark to end, evaluated and "
    "exported, inside the call; progress goes to `window.log` and `bench.log`, the summary to the output.",
    f"PYTHONUNBUFFERED=1 timeout {BENCH_SECONDS} python3 bench/bench_epoch.py --pack 16 8 32 --skip-pacs "
    '--methods vanilla fgr --cifar-steps 40 --unless-measured --out "$OUT" >"$OUT/bench.log" 2>&1; '
    'tail -n 6 "$OUT/bench.log"; python3 -m calibook paper cifar10h sensitivity --minutes 7 --log "$OUT/window.log" '
    '--export "$OUT/results.tgz"',
    call=True,
    carry=(".packs/cifar10h",),
    timeout_s=BENCH_SECONDS + 7 * 60,
)
AGAIN = Step(
    "**At once, while the machine is warm** (its 30 s: no step here between; skip it when the reply's "
    "`lease.budget_left_s` is under 300, and raise `--minutes` to (budget_left_s - 60) / 60 with "
    "`timeout_s` 30 s above it): the same queue in the minutes left, without a second start.",
    'python3 -m calibook paper cifar10h sensitivity --minutes 4 --log "$OUT/window.log" --export "$OUT/results.tgz"',
    call=True,
    carry=(".packs/cifar10h",),
    timeout_s=4 * 60 + 30,
    warm=True,
)
IMPORT = Step(
    "**Here, after the calls** (`FILES_AT`: the replies' `files_at` folders, one after the other; an archive "
    "with 0 records is a normal result), then `give_back` at once:",
    "python -m calibook paper --import FILES_AT && (for d in FILES_AT; do cp $d/epoch_*.json bench/results/ 2>/dev/null; "
    "done; true) && "
    "git add results/ bench/results/ && "
    '(git diff --cached --quiet || git commit -q -m "paper-scale results: one GPU session")',
)

#: A session's steps in order (a later session skips the pack unless the data changed).
SESSION: tuple[Step, ...] = (PACK, CHECK, CALL, AGAIN, IMPORT)


def reserve_seconds(minutes: float) -> float:
    """Seconds a window command of ``minutes`` keeps free at its end (at most a fifth of them)."""
    return min(60 * RESERVE_MINUTES, 12 * minutes)


def training_minutes() -> float:
    """Training minutes a session leaves: each training call's ``--minutes`` less its setup and reserve."""
    return sum(
        max(m - SETUP_MINUTES - reserve_seconds(m) / 60, 0.0)
        for s in SESSION
        if s.call and (m := s.minutes()) is not None
    )


def at_scale(command: str, scale: str) -> str:
    """``command`` at ``scale``: ``--scale SCALE`` after every ``python3 -m calibook paper`` and
    ``bench/bench_epoch.py`` in it (the recipe's commands are written for the paper scale)."""
    if scale == "paper":
        return command
    return re.sub(r"(python3? -m calibook paper|bench/bench_epoch\.py)", rf"\1 --scale {scale}", command)


def _block(step: Step) -> str:
    if not step.call:
        return f"{step.title}\n\n    {step.command}\n"
    carry = "[" + ", ".join(f'"{c}"' for c in step.carry) + "]"
    return f"{step.title}\n\n    run  timeout_s: {step.timeout_s}  carry: {carry}\n         command: {step.command}\n"


def render() -> str:
    """The recipe as the Markdown block of ``results/README.md``."""
    parts = [_block(step) for step in SESSION]
    parts.append(
        f"**Why two calls**: a session is lent {SESSION_MINUTES:g} device minutes in all; the first call "
        f"holds at most {CALL.device_minutes():g} of them ({CALL.timeout_s / 60:g} to run, about "
        f"{START_MINUTES:g} to start a fresh machine and send the tree, {IDLE_MINUTES * 60:g} s held after), "
        f"the second, on the warm machine, {AGAIN.device_minutes():g}, and no machine starts with under "
        f"{MIN_START_MINUTES:g} left. Their `--minutes` train about {training_minutes():g} of them (setup "
        f"~{SETUP_MINUTES:g} each, up to {RESERVE_MINUTES:g} kept to evaluate and export); `--dry-run` counts "
        "sessions with these. A run that cannot end inside its call does not start (a fresh machine would "
        "lose it): the queue takes the next run that can.\n"
    )
    return "\n".join(parts)


def _readme() -> Path:
    return repo_root() / "results" / "README.md"


def write_readme() -> bool:
    """Write :func:`render`'s block between the markers of ``results/README.md``; whether it changed."""
    path = _readme()
    text = path.read_text()
    start, end = (text.index(m) for m in MARKERS)
    new = text[: start + len(MARKERS[0])] + "\n\n" + render() + "\n" + text[end:]
    if new != text:
        path.write_text(new)
    return new != text


def readme_block() -> str:
    """The block between the markers of ``results/README.md`` as it is now."""
    text = _readme().read_text()
    start, end = (text.index(m) for m in MARKERS)
    return text[start + len(MARKERS[0]) : end].strip("\n") + "\n"


if __name__ == "__main__":  # python -m calibook.gpu.recipe: refresh results/README.md's block
    import argparse

    argparse.ArgumentParser(
        "python -m calibook.gpu.recipe",
        description="Rewrite results/README.md's recipe block from calibook.gpu.recipe if it differs.",
    ).parse_args()
    print("results/README.md: " + ("recipe block rewritten" if write_readme() else "recipe block up to date"))
    sys.exit(0)
