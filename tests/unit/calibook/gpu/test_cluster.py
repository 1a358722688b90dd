"""calibook.gpu.cluster and calibook.gpu.jobs: the queue's runs as submitit jobs, on this machine and on a real SLURM.

Shares follow the packs; bad input is one line naming the argument; a job of the local executor (real
processes) trains its share through the queue's own function, is preempted, requeued and resumes,
and publishes each run once; a failed job shows as failed and its runs are submitted again; a
one-node SLURM cluster (scripts/slurm-local.sh, started here when the machine allows it, the test
skipped with the reason otherwise) runs a smoke job, preempted and requeued through submitit's
signal, into results/.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

import calibook.gpu.queue as q
from lib.config import repo_root
from calibook.gpu import cluster, jobs, window

SINGLE, VANILLA, ROBUST = (f"cifar10h/{m}/lam2.0/w0/s0" for m in ("single", "vanilla", "robust"))
SCRIPT = repo_root() / "scripts" / "slurm-local.sh"


def _ids(share_lists):
    return [[[it.id.split("/")[1] for it in s] for s in job] for job in share_lists]


def test_shares_are_the_packs_and_a_job_holds_one_per_gpu(results):
    items = q.plan(["cifar10h", "l2d_cifar10"], "smoke")
    c10 = [it for it in items if it.page == "cifar10h"]
    # the packs lib.moe.grid.stack_groups makes: Single alone, the plain MoEs together, FGR with FGR
    assert _ids(cluster.make_shares(c10, "smoke")) == [
        [["single"]],
        [["vanilla", "robust", "robust_filtered"]],
        [["fgr", "fgr_robust"]],
    ]
    assert _ids(cluster.make_shares(c10, "smoke", stack=2))[1:3] == [[["vanilla", "robust"]], [["robust_filtered"]]]
    two = cluster.make_shares(c10, "smoke", per_job=2)
    assert [len(j) for j in two] == [2, 1]
    l2d = cluster.make_shares([it for it in items if it.page == "l2d_cifar10"], "smoke", stack=8)
    assert all(len(s) == 1 for job in l2d for s in job)  # a WRN page trains one run at a time: one per share
    pacs = cluster.make_shares(q.plan(["pacs"], "smoke"), "smoke")
    assert all(len({it.target for it in s}) == 1 for job in pacs for s in job)  # a pack holds one target
    assert cluster.pack_size("cifar10h", "smoke") == 8 and cluster.pack_size("l2d_cifar10", "smoke", 8) == 1


def test_a_job_with_several_gpus_gives_each_task_its_own_and_a_requeue_is_the_next_attempt(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    assert cluster._pick_gpu(1, 2) == "5" and os.environ["CUDA_VISIBLE_DEVICES"] == "5"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert cluster._pick_gpu(0, 1) is None and os.environ["CUDA_VISIBLE_DEVICES"] == "3"  # one task: as SLURM set it
    job = cluster.ShareJob(["cifar10h"], [[SINGLE], [VANILLA]], "smoke", 8, "/c", "/r", "python -m calibook paper")
    again = job.checkpoint()
    assert again.function == cluster.ShareJob(**{**vars(job), "attempt": 2}) and again.args == ()


def test_bad_input_is_one_line_naming_the_argument(results, monkeypatch, capsys, tmp_path):
    for argv, name in (
        (["--launch", "slurm", "--partition", "gpu;rm"], "--partition"),
        (["--launch", "slurm", "--partition", "a,,b"], "--partition"),
        (["--launch", "slurm", "--time", "-3"], "--time"),
        (["--launch", "slurm", "--time", "0"], "--time"),
        (["--launch", "local", "--gpus-per-job", "-1"], "--gpus-per-job"),
        (["--launch", "local", "--max-jobs", "0"], "--max-jobs"),
        (["--launch", "pbs"], "--launch"),
    ):
        with pytest.raises(SystemExit) as exit_:
            window.main(argv)
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and err.count("\n") == 1 and f"argument {name}" in err, (argv, err)
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch
    assert window.main(["cifar10h", "--scale", "smoke", "--launch", "slurm"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "launch: no `sbatch` on PATH" in err
    assert window.main(["--job-log", "123_4"]) == 2
    assert "job-log: no job '123_4'" in capsys.readouterr().err
    assert window.main(["cifar10h", "--scale", "smoke", "--launch", "local", "--runs", "cifar10h/nope"]) == 2
    assert "runs: 'cifar10h/nope' is not a run" in capsys.readouterr().err
    with pytest.raises(ValueError, match="partition"):
        cluster.launch(["cifar10h"], "smoke", "local", partition="a b", dry_run=True)
    with pytest.raises(ValueError, match="minutes"):
        cluster.launch(["cifar10h"], "smoke", "local", minutes=-1, dry_run=True)


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(c) for c in path.read_text().split()] if path.exists() else []


def _wait_for(what, timeout: float, step: float = 0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = what()
        if got:
            return got
        time.sleep(step)
    return None


def _log(job_id: str) -> str:
    try:
        return jobs.job_log(job_id)
    except ValueError:
        return ""


def test_a_local_job_trains_its_pack_through_the_queue_survives_preemption_and_publishes_once(results, capsys):
    """Single is published first by the queue's own function (as a lent-GPU call would); a local
    launch of Single, Vanilla and Robust then submits one job (the Vanilla + Robust pack: nothing
    published is retrained). The job is preempted (submitit's USR2) while it works: it is requeued,
    the second attempt trains the pack and publishes each run once; --status and --job-log say so,
    and a second launch has nothing to submit."""
    published, left = cluster.train_share(["cifar10h"], [SINGLE], "smoke", log=lambda s: None)
    assert len(published) == 1 and left == []
    before = (published[0].stat().st_mtime_ns, published[0].read_bytes())
    said: list[str] = []
    t = threading.Thread(
        target=lambda: said.append(
            cluster.launch(
                ["cifar10h"], "smoke", "local", runs=[SINGLE, VANILLA, ROBUST], minutes=10, gpus_per_job=0, poll=0.2
            )
        )
    )
    t.start()
    try:
        job = _wait_for(lambda: [j for e in jobs.launches() for j in e["jobs"]], 60)
        assert job and job[0]["shares"] == [[VANILLA, ROBUST]]
        job_id = job[0]["job"]
        assert _wait_for(lambda: "attempt 1," in _log(job_id), 120), _log(job_id)
        task = _wait_for(lambda: _children(int(job_id)), 10)
        assert task, "the local job's task process"
        os.kill(task[0], signal.SIGUSR2)  # what SLURM sends before a preemption or the time limit
        again: list[str] = []  # while the job runs, its runs are not submitted again
        cluster.launch(["cifar10h"], "smoke", "local", runs=[VANILLA, ROBUST], dry_run=True, log=again.append)
        assert again == [
            f"2 run(s) are in jobs queued, running or unseen from here ({job_id}): not submitted again",
            "nothing to submit: every planned run of cifar10h at scale smoke is in results/ or in a job",
        ]
    finally:
        t.join(timeout=240)
    assert not t.is_alive() and said and said[0] == [job_id]
    text = jobs.job_log(job_id)
    assert "Calling checkpoint method" in text and "attempt 2, 2 run(s)" in text, text
    for run in (VANILLA, ROBUST):
        assert text.count(f"published {run} ->") == 1, text
    assert before == (published[0].stat().st_mtime_ns, published[0].read_bytes())  # not retrained nor rewritten
    assert {it.id for it in q.plan(["cifar10h"], "smoke") if it.done} == {SINGLE, VANILLA, ROBUST}
    rec = json.loads(next(p for p in results.glob("cifar10h/moe/*.json") if VANILLA in p.read_text()).read_text())
    assert f"(job {job_id}, task 0, attempt 2)" in rec["queue"]["command"] and rec["queue"]["scale"] == "smoke"
    assert window.main(["cifar10h", "--scale", "smoke", "--status"]) == 0
    out = capsys.readouterr().out
    assert "cifar10h: 6 run(s): 3 published, 0 queued, 0 running, 0 failed, 3 not launched" in out
    assert f"job {job_id:>12s} (local) completed 2 of 2 run(s) published" in out
    assert cluster.launch(["cifar10h"], "smoke", "local", runs=[VANILLA], log=said.append) == []
    assert said[-1].startswith("nothing to submit")


def test_a_failed_job_shows_as_failed_and_its_runs_are_submitted_again(results):
    """A job that ended with an error, and one whose process is gone without a result (killed): both
    read as failed, with the error's last line; their unpublished runs are not held by any job, so a
    launch submits them again (here a dry run says so)."""
    from submitit.core.utils import JobPaths, cloudpickle_dump

    folder = jobs.slurm_dir() / "jobs" / "fake"
    folder.mkdir(parents=True)
    cloudpickle_dump(
        ("error", "Traceback ...\nRuntimeError: CUDA out of memory"), JobPaths(folder, "99", 0).result_pickle
    )
    entry = {"id": "fake", "launched": "2026-01-01T00:00:00+00:00", "launcher": "local", "scale": "smoke"}
    entry |= {"folder": str(folder), "pages": ["cifar10h"]}
    entry["jobs"] = [
        {"job": "99", "pages": ["cifar10h"], "shares": [[VANILLA]], "tasks": 1},
        {"job": "999999999", "pages": ["cifar10h"], "shares": [[ROBUST]], "tasks": 1},
    ]
    jobs.save_launch(entry)
    states = jobs.job_states()
    assert states["99"] == ("failed", "RuntimeError: CUDA out of memory")
    assert states["999999999"][0] == "failed" and "without a result" in states["999999999"][1]
    text = jobs.status(["cifar10h"], "smoke")
    assert "2 failed" in text and "launched again" in text and "--job-log JOB_ID" in text
    said: list[str] = []
    cluster.launch(["cifar10h"], "smoke", "local", runs=[VANILLA, ROBUST], dry_run=True, log=said.append)
    assert said[0].startswith("would submit 1 local job(s) for 2 run(s)")


def test_the_books_table_has_every_queued_page(results):
    table = cluster.plan_table("smoke")
    for page in q.PAGES:
        assert f"| {page} |" in table
    assert "| cifar10h | 6 | 0 | 3 | 3 |" in table  # 6 runs, none published, 3 packs, at most 3 runs a job


# ---- a real SLURM ----


def _slurm_unavailable() -> str | None:
    if os.name != "posix" or os.geteuid() != 0:
        return "not root (scripts/slurm-local.sh runs slurmctld and slurmd as root)"
    have = all(shutil.which(c) for c in ("sbatch", "slurmctld", "slurmd", "munged"))
    if not have and not shutil.which("apt-get"):
        return "SLURM is not installed (slurmctld slurmd slurm-client munge) and there is no apt-get"
    return None


@pytest.fixture(scope="module")
def slurm_conf():
    """A one-node SLURM cluster (scripts/slurm-local.sh start, installing Debian's packages if
    needed); its SLURM_CONF. Stopped afterwards unless it was running before or holds jobs."""
    why = _slurm_unavailable()
    if why:
        pytest.skip(f"no SLURM cluster on this machine: {why}")
    was_up = subprocess.run(["bash", str(SCRIPT), "status"], capture_output=True).returncode == 0
    try:
        got = subprocess.run(["bash", str(SCRIPT), "start", "--install"], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        pytest.skip("no SLURM cluster on this machine: scripts/slurm-local.sh start took over 300 s")
    if got.returncode != 0:
        lines = (got.stderr or got.stdout).strip().splitlines() or ["no output"]
        pytest.skip(f"no SLURM cluster on this machine: scripts/slurm-local.sh start failed: {lines[-1]}")
    conf = got.stdout.strip().splitlines()[-1].removeprefix("export SLURM_CONF=")
    yield conf
    env = {**os.environ, "SLURM_CONF": conf}
    idle = _wait_for(
        lambda: not subprocess.run(["squeue", "-h"], capture_output=True, text=True, env=env).stdout, 20, 0.5
    )
    if not was_up and idle:  # jobs of another session keep it running
        subprocess.run(["bash", str(SCRIPT), "stop"], capture_output=True)


def test_a_slurm_job_is_preempted_requeued_and_publishes_into_results(results, slurm_conf, monkeypatch, capsys):
    """``--launch slurm`` submits the smoke Single Expert as a CPU job (--gpus-per-job 0) to a real
    one-node cluster; the job gets SLURM's preemption signal (USR2, as ``--signal`` sends it before
    the time limit) while it works, submitit requeues it (scontrol requeue), and the second attempt
    publishes the record into results/, which --status and --job-log show."""
    monkeypatch.setenv("SLURM_CONF", slurm_conf)
    argv = ["cifar10h", "--scale", "smoke", "--launch", "slurm", "--gpus-per-job", "0", "--time", "5"]
    assert window.main([*argv, "--runs", SINGLE]) == 0
    job_id = jobs.launches()[-1]["jobs"][0]["job"]
    assert f"submitted job {job_id}: 1 run(s)" in capsys.readouterr().out
    assert _wait_for(lambda: "attempt 1," in _log(job_id), 90, 0.1), f"the job did not start:\n{_log(job_id)}"
    subprocess.run(["scancel", "--signal=USR2", job_id], check=True)
    assert _wait_for(lambda: jobs.job_states([job_id])[job_id][0] not in jobs.ACTIVE or None, 150, 0.5), _log(job_id)
    text = _log(job_id)
    assert jobs.job_states([job_id])[job_id] == ("completed", ""), text
    assert "Requeued job" in text and "attempt 2, 1 run(s)" in text and text.count(f"published {SINGLE} ->") == 1
    assert [it.id for it in q.plan(["cifar10h"], "smoke") if it.done] == [SINGLE]
    assert window.main(["cifar10h", "--scale", "smoke", "--status"]) == 0
    assert f"job {job_id:>12s} (slurm) completed 1 of 1 run(s) published" in capsys.readouterr().out
    assert window.main(["--job-log", job_id]) == 0 and "attempt 2" in capsys.readouterr().out
