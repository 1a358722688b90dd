"""lib.gpu.transfer: results made elsewhere come in only when they are today's runs, undamaged."""

import json

import pytest

import lib.engine.runs
import lib.gpu.queue as q


def test_import_checks_records_against_todays_plan(results, tmp_path):
    published = q.run_queue(["cifar10h"], minutes=30, scale="smoke", log=lambda s: None)
    src = tmp_path / "elsewhere"
    import shutil

    shutil.copytree(results, src)
    shutil.rmtree(results)
    assert len(q.import_results(src, "smoke")) == 2 * len(published)
    rec_path = next(src.glob("*/*/*.json"))
    rec = json.loads(rec_path.read_text())
    rec = lib.engine.runs.sign({**rec, "version": 99})  # stale: made by other code
    rec_path.write_text(json.dumps(rec))
    with pytest.raises(ValueError, match="stale"):
        q.import_results(src, "smoke")
    rec_path.write_text("{}")
    with pytest.raises(ValueError, match="damaged"):
        q.import_results(src, "smoke")
