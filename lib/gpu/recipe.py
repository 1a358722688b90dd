"""The recipe of a GPU window as data: what to run here and what each call to the lent machine runs.

``results/README.md`` shows these steps (the block between its ``recipe`` markers is
:func:`render`'s text: ``python -m lib.gpu.recipe`` rewrites it, and a test fails when the two
differ), the rehearsal test (``tests/test_window_rehearsal.py``) runs them in order at smoke scale,
each call in a fresh folder holding only what travels, and the projection
(:mod:`lib.gpu.projection`) counts the training minutes they leave per call and per window.

Every call stands alone: it carries the tree (``results/`` included) and every chunk of the data it
trains on, and assumes a fresh machine (one is kept warm only 30 s after a call).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from lib.config import repo_root

#: Device time one window holds, and what a call costs beside its command: a cold machine's start
#: with the transfers ("a minute or more"), and the 30 s it is held after the call.
WINDOW_MINUTES = 30.0
START_MINUTES = 2.0
IDLE_MINUTES = 0.5
#: What a training call spends before it trains: the interpreter and imports, unpacking the data,
#: decoding it and the engine's self-test (an estimate; each call's log prints what it measured).
SETUP_MINUTES = 1.0
#: What a call keeps free before its ``--minutes`` end (at most a fifth of them): evaluating and
#: publishing the last stack and writing the archive (:mod:`lib.gpu.window` stops training there).
RESERVE_MINUTES = 1.5
MARKERS = ("<!-- recipe: start (python -m lib.gpu.recipe writes this block) -->", "<!-- recipe: end -->")

__all__ = [
    "FIRST_WINDOW",
    "LATER_WINDOW",
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
    tool (``timeout_s`` seconds at most, carrying the ignored paths ``carry`` beside the tree)."""

    title: str
    command: str
    call: bool = False
    carry: tuple[str, ...] = ()
    timeout_s: int = 600

    def minutes(self) -> float | None:
        """The ``--minutes`` a window command of this step is given (``None``: it trains nothing)."""
        found = re.search(r"--minutes (\S+)", self.command)
        return float(found.group(1)) if found else None

    def device_minutes(self) -> float:
        """Device time the step holds at most: the command's limit, the start and the warm hold."""
        return self.timeout_s / 60 + START_MINUTES + IDLE_MINUTES if self.call else 0.0


PACK = Step(
    "**Here, once** (and again after the data changed, or when the check below says so): the data of "
    "CIFAR-10H and Sensitivity as one compressed chunk sized beside the tree and `results/` as they are now.",
    "python -m lib pack cifar10h",
)
CHECK = Step(
    "**Here, before every call**: what the call carries (tree, `results/` and the chunks) fits the 64 MiB "
    "a call takes, and every pack it carries is whole; otherwise it says what to do, and nothing is sent.",
    "python -m lib paper --carry .packs/cifar10h",
)
PREPARE = Step(
    "**Call 1** (first window only): the machine's versions and data fingerprints, the self-test, and the "
    "CUDA benchmark the projection and the stack sizes read (Vanilla's and FGR's steps, alone and in "
    "stacks of 8, with and without channels_last).",
    'python3 -m lib paper --prepare --log "$OUT/window.log" --export "$OUT/results.tgz" && '
    "PYTHONUNBUFFERED=1 timeout 300 python3 bench/bench_epoch.py --stack 8 --skip-pacs --methods vanilla fgr "
    '--cifar-steps 100 --out "$OUT"',
    call=True,
    carry=(".packs/cifar10h",),
    timeout_s=480,
)
TRAIN = Step(
    "**A training call** (10 minutes): CIFAR-10H, then Sensitivity, in stacks sized to end, evaluated "
    "and exported, inside the call; progress goes to `window.log`, the summary to the output.",
    'python3 -m lib paper cifar10h sensitivity --minutes 9 --log "$OUT/window.log" --export "$OUT/results.tgz"',
    call=True,
    carry=(".packs/cifar10h",),
)
IMPORT_BENCH = Step(
    "**Here, after call 1** (`FILES_AT` is the reply's `files_at` folder; an archive with 0 records is "
    "a normal result):",
    "python -m lib paper --import FILES_AT && cp FILES_AT/epoch_*.json bench/results/ && "
    'git add results/ bench/results/ && git commit -q -m "paper-scale window: call 1 (benchmark)"',
)
IMPORT = Step(
    "**Here, after every training call**:",
    "python -m lib paper --import FILES_AT && git add results/ && "
    '(git diff --cached --quiet || git commit -q -m "paper-scale results: one training call")',
)

#: A window's steps in order: the first one measures the machine, every later one trains twice.
FIRST_WINDOW: tuple[Step, ...] = (PACK, CHECK, PREPARE, IMPORT_BENCH, CHECK, TRAIN, IMPORT)
LATER_WINDOW: tuple[Step, ...] = (CHECK, TRAIN, IMPORT, CHECK, TRAIN, IMPORT)


def reserve_seconds(minutes: float) -> float:
    """Seconds a window command of ``minutes`` keeps free at its end (at most a fifth of them)."""
    return min(60 * RESERVE_MINUTES, 12 * minutes)


def training_minutes(steps: tuple[Step, ...] = LATER_WINDOW) -> float:
    """Training minutes ``steps`` leave: each training call's ``--minutes`` less its setup and reserve."""
    return sum(
        max(m - SETUP_MINUTES - reserve_seconds(m) / 60, 0.0)
        for s in steps
        if s.call and (m := s.minutes()) is not None
    )


def at_scale(command: str, scale: str) -> str:
    """``command`` at ``scale``: ``--scale SCALE`` after every ``python3 -m lib paper`` and
    ``bench/bench_epoch.py`` in it (the recipe's commands are written for the paper scale)."""
    if scale == "paper":
        return command
    return re.sub(r"(python3? -m lib paper|bench/bench_epoch\.py)", rf"\1 --scale {scale}", command)


def _block(step: Step) -> str:
    if not step.call:
        return f"{step.title}\n\n    {step.command}\n"
    carry = "[" + ", ".join(f'"{c}"' for c in step.carry) + "]"
    return f"{step.title}\n\n    run  timeout_s: {step.timeout_s}  carry: {carry}\n         command: {step.command}\n"


def render() -> str:
    """The recipe as the Markdown block of ``results/README.md``."""
    seen: list[Step] = []
    parts = []
    for step in FIRST_WINDOW:
        if step not in seen:
            parts.append(_block(step))
            seen.append(step)
    later = " -> ".join("check" if s is CHECK else "train" if s is TRAIN else "import" for s in LATER_WINDOW)
    per_call = training_minutes((TRAIN,))
    parts.append(
        f"**Every later window**: {later} (two training calls; each holds at most "
        f"{TRAIN.device_minutes():g} of the window's {WINDOW_MINUTES:g} device minutes: "
        f"{TRAIN.timeout_s // 60} to run, about {START_MINUTES:g} to start a fresh machine and send "
        f"the tree, {IDLE_MINUTES * 60:g} s held after). A training call of `--minutes "
        f"{TRAIN.minutes():g}` trains about {per_call:g} of them (setup ~{SETUP_MINUTES:g}, "
        f"{RESERVE_MINUTES:g} kept to evaluate and export): {training_minutes():g} training minutes per "
        f"later window, {training_minutes(FIRST_WINDOW):g} in the first; `--dry-run` counts windows with these.\n"
    )
    return "\n".join(parts)


def _readme() -> Path:
    return repo_root() / "results" / "README.md"


def write_readme(path: Path | None = None) -> bool:
    """Write :func:`render`'s block between the markers of ``results/README.md``; whether it changed."""
    path = path or _readme()
    text = path.read_text()
    start, end = (text.index(m) for m in MARKERS)
    new = text[: start + len(MARKERS[0])] + "\n\n" + render() + "\n" + text[end:]
    if new != text:
        path.write_text(new)
    return new != text


def readme_block(path: Path | None = None) -> str:
    """The block between the markers of ``results/README.md`` as it is now."""
    text = (path or _readme()).read_text()
    start, end = (text.index(m) for m in MARKERS)
    return text[start + len(MARKERS[0]) : end].strip("\n") + "\n"


if __name__ == "__main__":  # python -m lib.gpu.recipe: refresh results/README.md's block
    print("results/README.md: " + ("recipe block rewritten" if write_readme() else "recipe block up to date"))
    sys.exit(0)
