# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: tags,-all
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Across the papers: which calibration method fixes which failure?
#
# None of the four papers compares its methods with the others'. This chapter does, on data the
# book already has: the answer-letter logits of four Llama-3.1 models on all of MMLU
# {cite}`hendrycks2021mmlu` and the reweighted-risk authors' ResNet-50 CIFAR-10 logits, one model
# per training loss {cite}`zhou2025reweighted`. No training is needed: every method here is either
# post hoc (temperature scaling {cite}`guo2017calibration`, Platt scaling {cite}`platt1999`,
# histogram binning {cite}`zadrozny2001histogram`, per-expert temperatures as in MoCaE
# {cite}`oksuz2024mocae`) or was applied at training time by the logits' authors (focal, dual focal,
# AURC, KDE-XE losses). Each failure mode is one that a paper of the book studies:
#
# | failure | paper | question |
# |---|---|---|
# | over-confidence | all | is the confidence too high on held-out data? |
# | shift | 1, 3 | does a calibration fitted on some MMLU subjects hold on others? |
# | routing | 1 | does calibrating each expert calibrate a soft mixture of them? |
# | deferral | 2, 3 | can we estimate when *another* model is right, and route on it? |
# | training loss | 4 | how far do reweighted training losses get before post-hoc scaling? |

# %% [markdown]
# ## Parameters
# `scale` picks the data: `smoke` uses synthetic logits made in code, `cpu` and `paper` the real
# logits (the whole chapter takes under a minute on a laptop).

# %% tags=["parameters"]
scale: str = "cpu"  # smoke (synthetic logits, CI) | cpu (default: real logits) | paper (same as cpu)
seed: int = 0  # seed of the calibration/test split

# %% [markdown]
# The parameters are checked first: a misspelled name or a bad value stops the page here in one line;
# until the last cell has run, a notice below says that the page did not finish.

# %%
from lib import page

page.start("cross_paper", globals())

# %% [markdown]
# The settings for this scale come from `lib/scales.toml`; the data loaders say what is missing if
# the logits are not on disk.

# %%
import numpy as np
import pandas as pd

from lib import config, plots, report
from lib.ccc.cascade import split_halves
from lib.data.logits import load_resnet50_pair, synthetic_resnet_logits
from lib.data.mmlu import load_mmlu, synthetic_mmlu
from lib.cross_paper import study as xp
from lib.cross_paper import claims as cross_paper_claims

plots.use_offline_renderer()
cfg = config.settings("cross_paper", scale)
if cfg["synthetic"]:
    mmlu = synthetic_mmlu(n=cfg["n_synthetic"], seed=seed)
    resnets, cifar_labels = synthetic_resnet_logits(n=cfg["n_synthetic"], losses=tuple(cfg["losses"]), seed=seed)
else:
    mmlu = load_mmlu()
    resnets, cifar_labels = load_resnet50_pair(tuple(cfg["losses"]))
source = "synthetic logits (smoke test only)" if cfg["synthetic"] else "real MMLU Llama-3.1 and ResNet-50 CIFAR-10 logits"
report.publish_scale(scale, f"{source}; {len(mmlu)} MMLU questions, {len(cifar_labels)} CIFAR-10 images; no training")
small, large = cfg["small_model"], cfg["large_model"]
mmlu_cal, mmlu_test = split_halves(len(mmlu), seed=seed)
cifar_cal, cifar_test = split_halves(len(cifar_labels), seed=seed)
rows = []

# %% [markdown]
# ## Over-confidence: post-hoc scaling on held-out data
# Fit each post-hoc calibrator on one half and measure top-label ECE on the other, for the
# large instruct model and the cross-entropy ResNet-50.

# %%
for data, logits, labels, cal, test in (
    (large, mmlu.logits[large], mmlu.labels, mmlu_cal, mmlu_test),
    ("ResNet-50 (cross-entropy)", resnets["ce"], cifar_labels, cifar_cal, cifar_test),
):
    rows.append(xp.long_table("over-confidence", data, xp.posthoc_ece(logits, labels, cal, test)))
pd.concat(rows[-2:]).pivot(index="method", columns="data", values="value").round(4)

# %% [markdown]
# ## Shift: calibrate on some subjects, test on others
# Temperature scaling fitted on STEM questions is applied to the humanities' test half, and
# compared with a temperature fitted on the humanities' own calibration half.

# %%
category = mmlu.questions["category"].to_numpy()
src = np.flatnonzero(category == "stem")
tgt = np.flatnonzero(category == "humanities")
tgt_cal, tgt_test = (tgt[half] for half in split_halves(len(tgt), seed=seed))
for model in (small, large):
    rows.append(xp.long_table("shift", model, xp.shift_ece(mmlu.logits[model], mmlu.labels, src, tgt, tgt_cal, tgt_test)))
pd.concat(rows[-2:]).pivot(index="method", columns="data", values="value").round(4)

# %% [markdown]
# ## Routing: a soft mixture of separately trained experts
# The ResNet-50s trained with different losses act as experts, mixed by an input-dependent soft
# router that favours the more confident expert (a stand-in for paper 1's learned router).

# %%
experts = np.stack([resnets[k] for k in cfg["losses"]], axis=1)
routing = xp.confidence_routing(experts)
mix = xp.mixture_ece(experts, cifar_labels, routing, cifar_cal, cifar_test)
rows.append(xp.long_table("routing", cross_paper_claims.MIXTURE, {k: v for k, v in mix.items() if not k.startswith("accuracy")}))
pd.Series(mix).round(4).to_frame("test half")

# %% [markdown]
# ## Deferral: is the other model right?
# Estimate the large model's probability of being correct, raw and calibrated, and route a
# small-to-large cascade on uncalibrated vs calibrated confidence (APGR: 0.5 is random routing).

# %%
rows.append(xp.long_table("deferral", f"P({large} is right)", xp.other_model_correctness_ece(mmlu.logits[large], mmlu.labels, mmlu_cal, mmlu_test)))
rows.append(xp.long_table("deferral", f"cascade {small} -> {large}", xp.cascade_apgr(mmlu.logits[small], mmlu.logits[large], mmlu.labels, mmlu_cal, mmlu_test), metric="APGR"))
pd.concat(rows[-2:])[["data", "method", "metric", "value"]].round(4)

# %% [markdown]
# ## Training loss: reweighted risks before and after temperature scaling
# The same ResNet-50 architecture trained with each loss, as released by the reweighted-risk
# authors (the degenerate inverse-focal run is left out).

# %%
losses = xp.training_loss_ece(resnets, cifar_labels, cifar_cal, cifar_test)
rows.extend(cross_paper_claims.training_loss_rows(losses))
losses.round(4)

# %% [markdown]
# ## Which method fixes which failure
# The table is computed from the numbers above: for every failure mode, the uncorrected value and
# the method that did best on the test half (lower ECE; higher APGR).

# %%
table = pd.concat(rows, ignore_index=True)
fixes = xp.best_fix(table)
report.publish("best_fix", fixes[["failure", "data", "best method"]].to_dict("records"))
for name, ece in cross_paper_claims.overconfidence_published(table).items():
    report.publish(name, ece)
fixes.round(4)

# %% [markdown]
# The chart shows every method's test-half value per failure mode.

# %%
plots.method_comparison_chart(table)

# %% [markdown]
# ## Which expectations held
# Each row states what the papers lead one to expect on these data; the verdict is computed from
# the numbers above (`lib.cross_paper.claims`).

# %%
claims = cross_paper_claims.cross_paper_claims(table, mix, losses, small, large)
report.publish("claims", claims[["claim", "verdict"]].to_dict("records"))
claims

# %% [markdown]
# ## Summary
#
# A note on the MoCaE row: dividing each expert's logits by its own temperature changes how much
# each expert's probabilities weigh in the mixture, so the mixture's most likely class can change;
# per-expert scaling preserves each *expert's* accuracy, not necessarily the mixture's.
#
# Post-hoc scaling is the first tool for over-confidence, fitted on data like the test data; a
# mixture must be calibrated as a whole, not only expert by expert; the probability that *another*
# model is right needs its own calibration; training losses change calibration before post-hoc
# scaling, which then narrows their differences.
#
# ## References
#
# {cite}`hendrycks2021mmlu`, {cite}`zhou2025reweighted`, {cite}`guo2017calibration`,
# {cite}`platt1999`, {cite}`zadrozny2001histogram`, {cite}`oksuz2024mocae`, {cite}`wong2026moe`,
# {cite}`verma2022l2dcalibration`, {cite}`ccc2025`; the full list is on the
# [references page](../book/bibliography.md).

# %% [markdown]
# The page ran to its end, so the "did not finish" notice at the top is removed.

# %%
page.finish("cross_paper")
