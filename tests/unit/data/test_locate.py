"""lib.data.locate: search order and the message when nothing is found."""

import pytest

from lib.data import locate as loc


@pytest.fixture()
def roots(tmp_path, monkeypatch):
    env_root, shared, cache = tmp_path / "env", tmp_path / "shared", tmp_path / "cache"
    monkeypatch.setenv(loc.DATA_ENV, str(env_root))
    monkeypatch.setattr(loc, "shared_data_dir", lambda: shared)
    monkeypatch.setattr(loc, "local_data_cache", lambda: cache)
    return env_root, shared, cache


def test_order_explicit_env_shared_cache(tmp_path, roots) -> None:
    env_root, shared, cache = roots
    for root in (cache, shared, env_root):
        (root / "ds").mkdir(parents=True)
        (root / "ds" / "file").write_text("x")
        assert loc.locate("ds", "ds") == root / "ds"
    explicit = tmp_path / "mine"
    (explicit / "ds").mkdir(parents=True)
    (explicit / "ds" / "file").write_text("x")
    assert loc.locate("ds", "ds", explicit=explicit) == explicit / "ds"
    assert loc.locate("ds", "ds", explicit=explicit / "ds") == explicit / "ds"


def test_missing_names_dataset_places_and_how_to_get_it(roots, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(loc.DataNotFoundError) as err:
        loc.locate("civilcomments", "civilcomments", download=lambda d: d, how_to_get="run X")
    text = str(err.value)
    assert "'civilcomments' not found" in text and "$CALIBOOK_DATA" in text
    assert "../shared/data" in text and "local cache" in text
    assert "download skipped" in text and "How to get it: run X" in text


def test_download_is_used_when_online_and_failure_reported(roots, monkeypatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    _, _, cache = roots
    assert loc.locate("ds", "ds", download=lambda d: d / "ds") == cache / "ds"

    def broken(_):
        raise ConnectionError("no route to host")

    with pytest.raises(loc.DataNotFoundError, match="download failed: ConnectionError: no route"):
        loc.locate("ds", "other", download=broken)


def test_an_empty_or_partial_copy_does_not_shadow_a_complete_one(roots) -> None:
    env_root, shared, _ = roots
    (env_root / "ds").mkdir(parents=True)  # empty folder under $CALIBOOK_DATA
    (shared / "ds").mkdir(parents=True)
    (shared / "ds" / "questions.csv").write_text("a,b\n1,2\n")
    assert loc.locate("ds", "ds") == shared / "ds"
    (env_root / "ds" / "other.txt").write_text("x")  # non-empty, but not what the loader needs
    assert loc.locate("ds", "ds", needs=("questions.csv",)) == shared / "ds"
    (env_root / "ds" / "questions.csv").write_text("")  # present but empty: still not usable
    assert loc.locate("ds", "ds", needs=("questions.csv",)) == shared / "ds"
    (env_root / "f.npy").write_bytes(b"")
    (shared / "f.npy").write_bytes(b"data")
    assert loc.locate("ds", "f.npy") == shared / "f.npy"


def test_missing_lists_every_place_even_an_unset_variable_and_the_data_page(roots, monkeypatch) -> None:
    env_root, _, _ = roots
    monkeypatch.delenv(loc.DATA_ENV)
    with pytest.raises(loc.DataNotFoundError) as err:
        loc.locate("ds", "ds", needs=("x.csv",))
    text = str(err.value)
    assert "$CALIBOOK_DATA: not set" in text and "../shared/data" in text and "local cache" in text
    assert "book/data.md" in text and "README" not in text
    monkeypatch.setenv(loc.DATA_ENV, str(env_root))
    (env_root / "ds").mkdir(parents=True)
    with pytest.raises(loc.DataNotFoundError, match=r"\$CALIBOOK_DATA: .*ds \(holds no x.csv\)"):
        loc.locate("ds", "ds", needs=("x.csv",))


def test_empty_string_means_no_explicit_argument(roots) -> None:
    _, shared, _ = roots
    (shared / "ds").mkdir(parents=True)
    (shared / "ds" / "a").write_text("a")
    assert loc.locate("ds", "ds", explicit="") == shared / "ds"


def test_damaged_files_are_named(tmp_path) -> None:
    import zipfile

    import numpy as np
    import pandas as pd

    empty = tmp_path / "questions.csv"
    empty.write_text("")
    with pytest.raises(loc.DamagedDataError, match=r"questions\.csv: the file is damaged.*EmptyDataError"):
        with loc.reading(empty, "copy it again"):
            pd.read_csv(empty)
    bad_zip = tmp_path / "cifar10-jpeg.zip"
    bad_zip.write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(loc.DamagedDataError, match=r"cifar10-jpeg\.zip: .*BadZipFile.*How to get it again: X"):
        with loc.reading(bad_zip, "X"):
            zipfile.ZipFile(bad_zip)
    bad_npy = tmp_path / "probs.npy"
    bad_npy.write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(loc.DamagedDataError, match=r"probs\.npy"):
        with loc.reading(bad_npy):
            np.load(bad_npy)
    with pytest.raises(loc.DamagedDataError) as nested:  # an outer reading keeps the inner's message
        with loc.reading(bad_zip, "the bundle"), loc.reading(bad_npy, "X"):
            np.load(bad_npy)
    assert str(nested.value).count("the file is damaged") == 1 and str(nested.value).startswith(str(bad_npy))


def test_loaders_name_a_damaged_file(tmp_path, roots) -> None:
    from lib.data.logits import load_resnet50_logits
    from lib.data.mmlu import MODELS, load_mmlu

    folder = tmp_path / "mmlu-llama31"
    folder.mkdir()
    (folder / "questions.csv").write_text("\n\n")  # blank lines: found, but no csv
    for m in MODELS:
        (folder / f"logits_{m}.csv").write_text("subject,row\n")
    with pytest.raises(loc.DamagedDataError, match=r"mmlu-llama31/questions\.csv: the file is damaged"):
        load_mmlu(tmp_path)
    folder = tmp_path / "cifar10-resnet50-logits"
    folder.mkdir()
    (folder / "resnet50_ce_test.npz").write_bytes(b"PK\x03\x04 cut short")
    with pytest.raises(loc.DamagedDataError, match=r"resnet50_ce_test\.npz"):
        load_resnet50_logits("ce", tmp_path)


def test_describe_names_the_place_not_the_machine_path(roots) -> None:
    env_root, shared, _ = roots
    (shared / "pacs").mkdir(parents=True)
    assert loc.describe(shared / "pacs") == "../shared/data/pacs"
    assert loc.describe(env_root / "x" / "y.csv") == "$CALIBOOK_DATA/x/y.csv"
    assert loc.describe("/somewhere/else/file.csv") == "file.csv"


def test_an_explicit_root_that_does_not_exist_raises_and_never_falls_back(tmp_path, roots) -> None:
    env_root, shared, _ = roots
    (shared / "ds").mkdir(parents=True)
    (shared / "ds" / "file").write_text("x")  # a complete copy further down the list
    with pytest.raises(loc.DataNotFoundError, match="data root .*typo.*does not exist"):
        loc.locate("ds", "ds", explicit=tmp_path / "typo")


_QUESTIONS = "subject,row,question,A,B,C,D,answer\nanatomy,0,q0,a,b,c,d,A\nanatomy,1,q1,a,b,c,d,C\n"
_LOGITS = "subject,row,logit_A,logit_B,logit_C,logit_D\nanatomy,0,4,3,2,1\nanatomy,1,1,2,3,4\n"


@pytest.mark.parametrize("cut", ["anatomy,1,q1,a,b", "anatomy,", "anat"])
def test_a_truncated_questions_csv_names_the_file(tmp_path, roots, cut) -> None:
    from lib.data.mmlu import load_mmlu

    folder = tmp_path / "mmlu-llama31"
    folder.mkdir()
    (folder / "questions.csv").write_text(_QUESTIONS.split("anatomy,1")[0] + cut)
    (folder / "logits_llama-3.1-8b-base.csv").write_text(_LOGITS)
    with pytest.raises(ValueError, match=r"mmlu-llama31/questions\.csv") as err:
        load_mmlu(tmp_path, models=("llama-3.1-8b-base",))
    assert "\n" not in str(err.value).split(" How to get it")[0]


def test_a_non_numeric_logit_names_the_file(tmp_path, roots) -> None:
    from lib.data.mmlu import load_mmlu

    folder = tmp_path / "mmlu-llama31"
    folder.mkdir()
    (folder / "questions.csv").write_text(_QUESTIONS)
    (folder / "logits_llama-3.1-8b-base.csv").write_text(_LOGITS.replace(",4,3,", ",4,x3,"))
    with pytest.raises(loc.DamagedDataError, match=r"logits_llama-3\.1-8b-base\.csv: the file is damaged"):
        load_mmlu(tmp_path, models=("llama-3.1-8b-base",))


def test_a_corrupt_png_names_the_file(tmp_path, roots, monkeypatch) -> None:
    from PIL import Image

    from lib.data.image_files import PACS_CLASSES, PACS_DOMAINS, pacs_domain

    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "cache"))
    for d in PACS_DOMAINS:
        for c in PACS_CLASSES:
            (tmp_path / "pacs" / d / c).mkdir(parents=True)
            Image.new("RGB", (16, 16)).save(tmp_path / "pacs" / d / c / "0.png")
    bad = tmp_path / "pacs" / "photo" / "dog" / "0.png"
    bad.write_bytes(bad.read_bytes()[:30])
    with pytest.raises(loc.DamagedDataError, match=r"photo/dog/0\.png: the file is damaged"):
        pacs_domain("photo", size=8, data_dir=tmp_path)


def test_a_half_copied_mmlu_or_logits_folder_does_not_hide_a_full_copy(roots) -> None:
    """$CALIBOOK_DATA holds the questions and one model's logits (MMLU) and one loss's logits
    (ResNet-50); the complete copies further down the search order are the ones loaded."""
    import shutil
    from pathlib import Path

    import numpy as np

    from lib.data import logits, mmlu

    env_root, shared, _ = roots
    real = Path(__file__).resolve().parents[4] / "shared" / "data"
    if not (real / mmlu.FOLDER / "questions.csv").exists():
        pytest.skip("the shared MMLU and ResNet-50 logits are not on this machine")
    half = env_root / mmlu.FOLDER
    half.mkdir(parents=True)
    for name in ("questions.csv", "logits_llama-3.1-8b-instruct.csv"):
        shutil.copy(real / mmlu.FOLDER / name, half / name)
    shared.mkdir(parents=True)
    (shared / mmlu.FOLDER).symlink_to(real / mmlu.FOLDER)
    data = mmlu.load_mmlu()  # all four models: the half copy is passed over
    assert set(data.models) == set(mmlu.MODELS)
    assert len(mmlu.load_mmlu(models=("llama-3.1-8b-instruct",))) == len(data)  # the half copy serves that
    (env_root / logits.FOLDER).mkdir()
    shutil.copy(real / logits.FOLDER / "resnet50_ce_test.npz", env_root / logits.FOLDER)
    (shared / logits.FOLDER).symlink_to(real / logits.FOLDER)
    z, y = logits.load_resnet50_logits("focal")
    assert z.shape == (len(y), 10) and np.isfinite(z).all()
