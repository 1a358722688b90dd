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
# `scale` picks the settings in `lib/scales.toml`; the others override one setting each.

# %% tags=["parameters"]
scale: str = "cpu"  # smoke (synthetic) | cpu (default: real logits) | paper (as cpu)
seed: int = 0  # seed of the calibration/test split

# %% [markdown] tags=["remove-cell"]
# Setup (hidden in the book): check the parameters -- a bad name or value stops the page here in
# one line, and until the last cell has run a notice says the page did not finish -- and import.

# %% tags=["remove-cell"]
from calibook import page

page.start("cross_paper", globals())

import numpy as np
import pandas as pd

from IPython.display import Markdown, display

from lib import config, plots
from lib.calibration.metrics import ece
from lib.calibration.posthoc import HistogramBinning
from lib.ccc.pages import logits_data, released_runs_note
from lib.cross_paper.pages import cross_paper
from lib.rr.pages.losses_released_logits import RELEASED_LABELS

PAGE = cross_paper.PAGE  # the chapter's run and claims
plots.use_offline_renderer()
pd.set_option("display.max_colwidth", None)  # tables show their text cells whole

# %% [markdown]
# ## The methods
# Every fix here is post hoc and fitted on a calibration half: temperature scaling divides the
# logits by one $T$ ($\hat p = \mathrm{softmax}(z/T)$), Platt scaling fits $\sigma(a s + b)$ to
# correctness, histogram binning replaces each confidence by its bin's accuracy, and MoCaE gives each
# expert $k$ of a mixture $p = \sum_k r_k\, \mathrm{softmax}(z_k / T_k)$ its own $T_k$. Each is judged
# by the test-half ECE (or APGR for the cascade, see [Cascading](cascading.ipynb)). Below, a mixture
# of one expert with routing weight 1, computed by
# {py:func}`lib.cross_paper.pages.cross_paper.mixture_ece` on synthetic logits three times too
# sharp: there per-expert and global temperature scaling are the same method, so their ECEs agree.
# The labels were drawn from $\mathrm{softmax}(z)$ itself, so $T = 3$ undoes the sharpening
# exactly, and the ECE of those true probabilities on the same 300 test examples (the last row) is
# the floor that sampling noise leaves: the fitted temperatures should come near it, not reach 0.

# %%
rng = np.random.default_rng(0)
z = rng.normal(size=(600, 1, 4)) * 2
y = np.array([rng.choice(4, p=p) for p in cross_paper.softmax(z[:, 0])])
cal, test = np.arange(300), np.arange(300, 600)
one = cross_paper.mixture_ece(3 * z, y, np.ones((600, 1)), cal, test)
one["true probabilities softmax(z)"] = ece(cross_paper.softmax(z[test, 0]), y[test])
pd.Series(one).round(4).to_frame("test half")

# %% [markdown]
# Histogram binning by hand ({py:class}`lib.calibration.posthoc.HistogramBinning`): confidences
# .6, .7, .8, .9 with outcomes 0, 1, 1, 1 in two equal-count bins have accuracies 1/2 and 1, so a
# new confidence of .65 becomes 0.5 and one of .95 becomes 1.

# %%
HistogramBinning(2).fit([0.6, 0.7, 0.8, 0.9], [0, 1, 1, 1]).predict([0.65, 0.95])


# %% [markdown]
# ## Settings and data
# `scale` picks the data ({py:func}`lib.config.settings`): `smoke` uses synthetic logits made in
# code, `cpu` and `paper` the real logits ({py:func}`lib.ccc.pages.logits_data`; the whole chapter
# takes under a minute on a laptop).

# %%
cfg = config.settings("cross_paper", scale, seed=seed)
mmlu, resnets, y = logits_data(
    not cfg["synthetic"], cfg["losses"], cfg["n_synthetic"], cfg["seed"])
data = {"mmlu": mmlu, "resnets": resnets, "cifar_labels": y}
display(Markdown(page.publish_scale(scale, PAGE.scale_summary(cfg, data))))
display(Markdown(released_runs_note(cfg["losses"], not cfg["synthetic"])))
res = PAGE.run(cfg, data)
table = res["table"]

# %% [markdown]
# ## Over-confidence: post-hoc scaling on held-out data
# Each post-hoc calibrator fitted on one half, top-label ECE on the other, for the large instruct
# model and the cross-entropy ResNet-50 (the released XE run above).

# %%
def by_method(failure: str):
    rows = table.query("failure == @failure")
    return rows.pivot(index="method", columns="data", values="value").round(4)


by_method("over-confidence")

# %% [markdown]
# ## Shift: calibrate on some subjects, test on others
# Temperature scaling fitted on STEM questions is applied to the humanities' test half, and
# compared with a temperature fitted on the humanities' own calibration half.

# %%
by_method("shift")

# %% [markdown]
# ## Routing: a soft mixture of separately trained experts
# The ResNet-50s trained with different losses act as experts, mixed by an input-dependent soft
# router that favours the more confident expert (a stand-in for paper 1's learned router).

# %%
pd.Series(res["mix"]).round(4).to_frame("test half")

# %% [markdown]
# ## Deferral: is the other model right?
# Estimate the large model's probability of being correct from the small model's outputs alone,
# as a deferring model must: the small model's raw and temperature-scaled confidence (calibrated for
# its own correctness) and a Platt fit to the large model's correctness on the calibration half;
# then route a small-to-large cascade on uncalibrated vs calibrated confidence (APGR: 0.5 is
# random routing).

# %%
table.query("failure == 'deferral'")[["data", "method", "metric", "value"]].round(4)

# %% [markdown]
# ## Training loss: reweighted risks before and after temperature scaling
# The same ResNet-50 architecture trained with each loss, as released by the reweighted-risk
# authors (the degenerate inverse-focal run is left out), named as in the paper's tables (the
# released `focal` file taken as FL-53, as on the released-logits page).

# %%
res["losses"].replace({"loss": RELEASED_LABELS}).set_index("loss").round(4)

# %% [markdown]
# ## Which method fixes which failure
# For every failure mode, the uncorrected value and the method that did best on the test half
# (lower ECE; higher APGR), and every method's value in the chart.

# %%
fixes = cross_paper.best_fix(table)
display(fixes.round(4))
plots.method_comparison_chart(table)

# %% [markdown]
# ## Which expectations held
# Each row states what the papers lead one to expect on these data; the verdict is computed from
# the numbers above by {py:func}`lib.cross_paper.pages.cross_paper.cross_paper_claims`, with the
# book's one symmetric rule: an ECE on $n$ test examples varies by about $0.5/\sqrt{n}$
# ({py:func}`lib.ccc.pages.ece_se`), an APGR by its standard error over the test half
# ({py:func}`lib.ccc.cascade.apgr_test_se`, as on the cascading page), and a difference inside 1.96 such errors (closed forms: infinite degrees of freedom in
# `lib.report.t_verdict`) is "inconclusive".

# %%
claims = PAGE.claims(res, cfg)
page.publish_claims(claims)

# %% [markdown]
# ## Summary
#
# A note on the MoCaE row: dividing each expert's logits by its own temperature changes how much
# each expert's probabilities weigh in the mixture, so the mixture's most likely class can change;
# per-expert scaling preserves each *expert's* accuracy, not necessarily the mixture's.
#
# What the sections test, in one sentence each (the claims table above says which held at this
# scale): post-hoc scaling as the first tool for over-confidence, fitted on data like the test
# data; a mixture calibrated as a whole, not only expert by expert; the probability that *another*
# model is right needing its own calibration; training losses changing calibration before post-hoc
# scaling, which may then narrow their differences.
#
# ## Provenance
# The numbers the tests and the landing page read (the best fix per failure mode and the
# over-confidence ECEs), published in one call, and the settings.

# %%
page.publish_values(
    best_fix=fixes[["failure", "data", "best method"]].to_dict("records"),
    **cross_paper.overconfidence_published(table),
)
cfg

# %% [markdown]
# ## References
#
# {cite}`hendrycks2021mmlu`, {cite}`zhou2025reweighted`, {cite}`guo2017calibration`,
# {cite}`platt1999`, {cite}`zadrozny2001histogram`, {cite}`oksuz2024mocae`, {cite}`wong2026moe`,
# {cite}`verma2022l2dcalibration`, {cite}`ccc2025`; the full list is on the
# [references page](../book/bibliography.md).

# %% [markdown] tags=["remove-cell"]
# The page ran to its end: remove the "did not finish" notice.

# %% tags=["remove-cell"]
page.finish("cross_paper")
