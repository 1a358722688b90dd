"""calibook.gpu.transfer: results made elsewhere come in only when they are today's runs at this scale,
undamaged; archives stay under what a file may bring back; an empty archive is 0 records."""

import json
import shutil
import tarfile

import pytest

import calibook.runs
import calibook.gpu.queue as q
from calibook.gpu import transfer, window


def test_import_checks_records_against_todays_plan(results, tmp_path, capsys):
    published = q.run_queue(["cifar10h"], minutes=30, scale="smoke", log=lambda s: None)
    src = tmp_path / "elsewhere"
    shutil.copytree(results, src)
    shutil.rmtree(results)
    assert len(transfer.import_results(src, "smoke")) == 2 * len(published)
    assert transfer.import_results(src, "smoke") == []  # the same runs again: nothing new is written
    assert window.main(["--import", str(src), "--scale", "smoke"]) == 0
    assert capsys.readouterr().out.startswith("imported nothing new: results/ holds every record given already")
    rec_path = next(src.glob("*/*/*.json"))
    rec_path.write_text(rec_path.read_text().rstrip() + "\n\n")  # the same record, other bytes: written
    assert [p.name for p in transfer.import_results(src, "smoke")] == [rec_path.name]
    with pytest.raises(ValueError, match="made at scale 'smoke', not 'paper'; import it with --scale smoke"):
        transfer.import_results(src, "paper")  # the records know their scale
    rec = json.loads(rec_path.read_text())
    rec_path.write_text(json.dumps(calibook.runs.sign({**rec, "version": 99})))  # stale: made by other code
    with pytest.raises(ValueError, match="stale"):
        transfer.import_results(src, "smoke")
    rec_path.write_text("{}")
    with pytest.raises(ValueError, match="damaged"), pytest.warns(UserWarning, match="has no checksum"):
        transfer.import_results(src, "smoke")


def test_archives_split_under_the_limit_and_import_back_from_the_folder_a_call_brought_back(results, tmp_path):
    """Six records of about equal size, archives of at most two: three archives, named in order; the
    folder holding them (and a log beside them) imports all six. An empty archive is 0 records; a
    folder with loose .json files at its top is named; records one level deeper are refused; an archive
    cut short is named."""
    published = q.run_queue(["cifar10h"], minutes=30, scale="smoke", log=lambda s: None)
    sizes = sorted(transfer.record_bytes([p]) for p in published)
    assert sizes[-1] + sizes[-2] < sum(sizes[:3])  # any two records fit the limit below, no three
    out = tmp_path / "OUT"
    archives = transfer.export(published, out / "results.tgz", max_bytes=sizes[-1] + sizes[-2])
    assert [a.name for a in archives] == ["results.tgz", "results-2.tgz", "results-3.tgz"]
    for a in archives:
        with tarfile.open(a) as tar:
            assert len([n for n in tar.getnames() if n.endswith(".json")]) == 2
    with pytest.raises(ValueError, match="more than an archive may hold"):
        transfer.export(published, tmp_path / "x.tgz", max_bytes=sizes[0] - 1)
    (out / "window.log").write_text("machine: ...\n")
    shutil.rmtree(results)
    assert len([p for p in transfer.import_results(out, "smoke") if p.suffix == ".json"]) == 6
    cut = tmp_path / "cut.tgz"  # an archive cut short on its way back is named, not an EOFError
    cut.write_bytes(archives[0].read_bytes()[: archives[0].stat().st_size // 2])
    with pytest.raises(ValueError, match=f"^import: {cut} is damaged"):
        transfer.import_results(cut, "smoke")

    empty = transfer.export([], tmp_path / "empty" / "results.tgz")
    assert [p.name for p in empty] == ["results.tgz"]
    assert transfer.import_results(empty[0], "smoke") == [] == transfer.import_results(empty[0].parent, "smoke")
    (tmp_path / "loose").mkdir()
    (tmp_path / "loose" / "epoch_cuda-H100.json").write_text("{}")
    with pytest.raises(ValueError, match="holds epoch_cuda-H100.json at its top"):
        transfer.import_results(tmp_path / "loose", "smoke")
    shutil.copytree(results, tmp_path / "nested" / "results")
    with pytest.raises(ValueError, match="one level deeper"):
        transfer.import_results(tmp_path / "nested", "smoke")
