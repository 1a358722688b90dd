"""MMLU with zero-shot answer-letter logits of four Llama-3.1 models, and a synthetic stand-in.

The real data (``../shared/data/mmlu-llama31``, see its README) is ``questions.csv`` (14,042 MMLU
test questions, ``subject,row,question,A,B,C,D,answer``) and one ``logits_<model>.csv`` per model
(``subject,row,logit_A..logit_D``: next-token logits of the four answer letters). Following paper 3
(section 2.1, "Confidence function"), the confidence is restricted to the four options and
renormalised: p = softmax over (logit_A..logit_D). :func:`synthetic_mmlu` is the smoke scale's stand-in.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from lib.data.locate import describe, locate, reading
from lib.validation import check_choice, check_int, check_number

MODELS: tuple[str, ...] = ("llama-3.1-8b-base", "llama-3.1-8b-instruct", "llama-3.1-70b-base", "llama-3.1-70b-instruct")
LETTERS: tuple[str, ...] = ("A", "B", "C", "D")
FOLDER = "mmlu-llama31"
HOW_TO_GET = (
    "copy the folder mmlu-llama31 (questions.csv and logits_<model>.csv for the four Llama-3.1 "
    "models, from github.com/alecwangcq/llm-calibration @ b267b91) under a data root, or set "
    "$CALIBOOK_DATA to a folder holding mmlu-llama31/. At smoke scale use synthetic_mmlu() instead."
)

# The four MMLU categories of Hendrycks et al. (2021), used for the distribution-shift check
# (calibrate on one group of subjects, cascade on a disjoint group).
CATEGORIES: dict[str, tuple[str, ...]] = {
    "stem": tuple(
        "abstract_algebra anatomy astronomy college_biology college_chemistry college_computer_science "
        "college_mathematics college_physics computer_security conceptual_physics electrical_engineering "
        "elementary_mathematics high_school_biology high_school_chemistry high_school_computer_science "
        "high_school_mathematics high_school_physics high_school_statistics machine_learning".split()
    ),
    "humanities": tuple(
        "formal_logic high_school_european_history high_school_us_history high_school_world_history "
        "international_law jurisprudence logical_fallacies moral_disputes moral_scenarios philosophy "
        "prehistory professional_law world_religions".split()
    ),
    "social_sciences": tuple(
        "econometrics high_school_geography high_school_government_and_politics high_school_macroeconomics "
        "high_school_microeconomics high_school_psychology human_sexuality professional_psychology "
        "public_relations security_studies sociology us_foreign_policy".split()
    ),
    "other": tuple(
        "business_ethics clinical_knowledge college_medicine global_facts human_aging management marketing "
        "medical_genetics miscellaneous nutrition professional_accounting professional_medicine virology".split()
    ),
}
SUBJECT_CATEGORY: dict[str, str] = {s: c for c, subs in CATEGORIES.items() for s in subs}


@dataclass
class MMLUData:
    """``questions`` (``subject,row,question,A,B,C,D,answer,category``), ``labels`` (N,) in 0..3 and each
    model's (N, 4) answer-letter ``logits``, rows aligned."""

    questions: pd.DataFrame
    labels: np.ndarray
    logits: dict[str, np.ndarray] = field(default_factory=dict)
    source: str = ""

    @property
    def models(self) -> tuple[str, ...]:
        """The models with logits, in load order."""
        return tuple(self.logits)

    def __len__(self) -> int:
        return int(self.labels.shape[0])


def load_mmlu(root: str | os.PathLike[str] | None = None, models: tuple[str, ...] = MODELS) -> MMLUData:
    """``questions.csv`` and the logits of ``models`` under ``root`` (or found by
    :func:`lib.data.locate.locate`), aligned by (subject, row); ``ValueError`` when a logits file does
    not cover exactly the questions' keys."""
    for m in models:
        check_choice(m, MODELS, "models")
    needs = ("questions.csv", *(f"logits_{m}.csv" for m in models))  # a half copy is passed over
    folder = locate("mmlu-llama31", FOLDER, explicit=root, how_to_get=HOW_TO_GET, needs=needs)
    qpath = folder / "questions.csv"  # locate found it
    with reading(qpath, HOW_TO_GET):  # an empty, truncated or malformed csv is named in the error
        questions = pd.read_csv(qpath, keep_default_na=False, dtype={"answer": str})
        questions["row"] = questions["row"].astype(np.int64)
        keys = pd.MultiIndex.from_frame(questions[["subject", "row"]])
    if keys.has_duplicates:
        raise ValueError(f"{qpath}: duplicate (subject, row) keys")
    if (bad := ~questions["answer"].isin(LETTERS)).any():
        raise ValueError(f"{qpath}: {int(bad.sum())} answers are not one of A-D (a truncated or edited file?)")
    labels = questions["answer"].map(LETTERS.index).to_numpy(np.int64)
    logits: dict[str, np.ndarray] = {}
    cols = [f"logit_{c}" for c in LETTERS]
    for m in models:
        path = folder / f"logits_{m}.csv"  # locate found it
        with reading(path, HOW_TO_GET):  # a truncated file or a non-numeric logit is named in the error
            df = pd.read_csv(path)
            df["row"] = df["row"].astype(np.int64)
            lkeys = pd.MultiIndex.from_frame(df[["subject", "row"]])
            numeric = df[cols].to_numpy(np.float64)
        if lkeys.has_duplicates or len(df) != len(questions) or not lkeys.isin(keys).all():
            raise ValueError(
                f"models: {path} does not cover exactly the {len(questions)} questions' (subject, row) keys"
            )
        if not np.all(np.isfinite(numeric)):
            raise ValueError(f"models: {path} holds NaN or infinite logits")
        # Align by key (a no-op when the files share the row order, as the released ones do).
        logits[m] = df.set_index(["subject", "row"]).loc[keys, cols].to_numpy(np.float64)
    questions["category"] = questions["subject"].map(SUBJECT_CATEGORY).fillna("other")
    return MMLUData(questions, labels, logits, source=f"MMLU with Llama-3.1 logits ({describe(folder)})")


# Generative model of the synthetic stand-in: per model, skill m (margin of the key's logit) and
# overconfidence kappa (reported logits are kappa times the calibrated ones); instruct models are
# overconfident, base models calibrated, as in the real data (README: "instruct models overconfident,
# base models well calibrated").
SYNTHETIC_MODELS: dict[str, tuple[float, float]] = {
    "llama-3.1-8b-base": (1.3, 1.0),
    "llama-3.1-8b-instruct": (1.4, 2.5),
    "llama-3.1-70b-base": (2.2, 1.0),
    "llama-3.1-70b-instruct": (2.6, 2.0),
}


def synthetic_logits(
    labels: np.ndarray,
    skills: dict[str, tuple[float, float]],
    num_classes: int,
    shared: float,
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    """Logits z = kappa * m * (m 1[c = y] + noise), noise ~ N(0, 1) per class.

    With unit-variance Gaussian noise the posterior of the label given x = m 1[c=y] + noise is
    softmax(m x) under a uniform prior, so kappa = 1 is calibrated by construction and temperature
    scaling recovers T = kappa. ``shared`` in [0, 1) correlates the noise across models (they err on
    the same questions), keeping each model's noise N(0, 1).
    """
    n = labels.shape[0]
    onehot = np.eye(num_classes)[labels]
    common = rng.standard_normal((n, num_classes))
    out = {}
    for name, (m, kappa) in skills.items():
        noise = np.sqrt(shared) * common + np.sqrt(1 - shared) * rng.standard_normal((n, num_classes))
        out[name] = kappa * m * (m * onehot + noise)
    return out


def synthetic_mmlu(n: int = 2000, seed: int = 0, shared: float = 0.3) -> MMLUData:
    """A synthetic MMLU of ``n`` questions (subjects drawn from the 57 real ones, uniform labels) with
    :func:`synthetic_logits` of ``SYNTHETIC_MODELS`` plus 15 (like the real letter logits)."""
    check_int(n, "n", 8)
    check_number(shared, "shared", 0.0, 1.0, high_open=True)
    check_int(seed, "seed", 0)
    rng = np.random.default_rng(seed)
    subjects = sorted(SUBJECT_CATEGORY)
    subj = rng.choice(subjects, size=n)
    labels = rng.integers(0, 4, size=n)
    logits = {k: v + 15.0 for k, v in synthetic_logits(labels, SYNTHETIC_MODELS, 4, shared, rng).items()}
    questions = pd.DataFrame(
        {
            "subject": subj,
            "row": np.arange(n, dtype=np.int64),
            "question": [f"Synthetic question {i}" for i in range(n)],
            **{c: [f"option {c}" for _ in range(n)] for c in LETTERS},
            "answer": [LETTERS[i] for i in labels],
        }
    )
    questions["category"] = questions["subject"].map(SUBJECT_CATEGORY)
    return MMLUData(questions, labels.astype(np.int64), logits, source=f"synthetic(n={n}, seed={seed})")
