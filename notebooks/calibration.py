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
# # Calibration is reliable
#
# *Paper 3, section 3.1 and Table 1* {cite}`ccc2025`. **What the paper claims:**
#
# 1. Higher confidence means higher accuracy, even before calibration: accuracy rises across
#    equal-count confidence bins.
# 2. A calibration fitted on one half of the data holds on the other half. The paper uses temperature
#    scaling {cite}`guo2017calibration` for vision and Platt scaling {cite}`platt1999` for language
#    (section 2.1), and its Table 1 reports ECE on MMLU (LLaMA-8B-Instruct) of
#    **0.1902 -> 0.0913** on the calibration half and **0.1830 -> 0.0901** on the held-out half,
#    and on ImageNet (EVA02-L) 0.2617 -> 0.0271 and 0.2624 -> 0.0296.
#
# We check both on real model outputs: the four Llama-3.1 models' zero-shot answer-letter logits on
# all 14,042 MMLU test questions {cite}`hendrycks2021mmlu`, and a ResNet-50 {cite}`he2016resnet`
# trained with cross-entropy on CIFAR-10 (standing in for the paper's ImageNet model, which is not
# available offline). ECE uses equal-count bins as the paper does (section 2.1); the paper does not
# state their number for Table 1, so we use 15, its cascade default (Table 5).

# %% [markdown]
# ## Parameters
# `scale` picks the settings in `lib/scales.toml`; the others override one setting each.

# %% tags=["parameters"]
scale: str = "cpu"  # smoke (synthetic) | cpu (default: real logits) | paper (as cpu)
seed: int = 0  # seed of the calibration/test split
n_bins: int = 0  # equal-count bins for ECE and the diagrams; 0 keeps the scale's value

# %% [markdown] tags=["remove-cell"]
# Setup (hidden in the book): check the parameters -- a bad name or value stops the page here in
# one line, and until the last cell has run a notice says the page did not finish -- and import.

# %% tags=["remove-cell"]
from calibook import page

page.start("calibration", globals())

from lib import plots, report
from lib.config import settings
from lib.ccc.plots import ccc_reliability_grid
from lib.ccc.pages import calibration, released_runs_note

PAGE = calibration.PAGE

plots.use_offline_renderer()

# %% [markdown]
# ## The method
# A model gives each example its top-1 confidence $\hat p_i$ and is right or not ($k_i \in \{0,1\}$).
# Sort the confidences into $B$ equal-count bins $S_1, \dots, S_B$; then
#
# $$\mathrm{ECE} = \sum_{b=1}^{B} \frac{|S_b|}{n}\,\Big|\,\mathrm{acc}(S_b) - \mathrm{conf}(S_b)\Big|,$$
#
# where $|S_b|/n$ weighs each bin by its share of examples, $\mathrm{acc}(S_b)$ is the share right
# in the bin and $\mathrm{conf}(S_b)$ its mean confidence. Temperature scaling divides the logits by
# one $T > 0$ fitted by NLL on the calibration half, $\hat p_i = \max_c \mathrm{softmax}(z_i / T)_c$;
# Platt scaling maps a score $s_i$, the log-odds $\ln(\hat p_i / (1 - \hat p_i))$ of the top-1
# probability over the answer options, to $\sigma(a s_i + b)$, $a, b$ fitted by NLL to
# correctness. Below, four examples in two bins, computed by
# {py:func}`lib.calibration.metrics.binary_ece` and by the formula in one line of numpy: each bin is
# 0.4 off, so ECE = 0.4; with one bin it is |mean confidence - accuracy| = |0.75 - 0.75| = 0.
# Then {py:func}`lib.calibration.posthoc.apply_temperature` beside softmax(z / T) written out, and
# {py:func}`lib.calibration.posthoc.fit_platt` on eight scores that take two values, right 1 time
# in 4 at $s = 0$ and 3 in 4 at $s = 1$: the fitted $\sigma(a s + b)$ is exactly those accuracies,
# $a = 2 \ln 3 \approx 2.197$, $b = -\ln 3 \approx -1.099$.

# %%
import numpy as np

from lib.calibration.metrics import binary_ece
from lib.calibration.posthoc import apply_temperature, fit_platt

conf, right = np.array([0.6, 0.6, 0.9, 0.9]), np.array([1, 1, 1, 0])
bins = [0, 1], [2, 3]  # two equal-count bins
z, T = np.array([2.0, 0.0]), 100.0
s, o = np.repeat([0.0, 1.0], 4), np.array([0, 0, 0, 1, 0, 1, 1, 1])  # score, right
a, b = fit_platt(s, o)
{"ECE, 2 bins": binary_ece(conf, right, 2, binning="mass"),
 "ECE by hand": float(sum(0.5 * abs(right[i].mean() - conf[i].mean()) for i in bins)),
 "ECE, 1 bin": binary_ece(conf, right, 1, binning="mass"),
 "softmax(z / 100)": apply_temperature(z, T).round(3).tolist(),
 "softmax by hand": (np.exp(z / T) / np.exp(z / T).sum()).round(3).tolist(),
 "Platt a, b": (round(a, 3), round(b, 3)),
 "sigma(a s + b), s = 0, 1": (1 / (1 + np.exp(-(a * np.array([0, 1]) + b)))).round(3),
 "accuracy at s = 0, 1": [o[s == v].mean().item() for v in (0, 1)]}


# %% [markdown]
# ## Settings and data
# Each model's (N, C) logits with its labels; MMLU confidences are the softmax over the four answer
# letters (paper 3, section 2.1).

# %%
cfg = settings("calibration", scale, seed=seed, n_bins=n_bins or None)
REAL = cfg["data"] == "real"
scale_line = page.publish_scale(scale, PAGE.scale_summary(cfg))
report.show(scale_line + "\n\n" + released_runs_note(["ce"], REAL))
models = PAGE.data(cfg)
vision = calibration.vision_model(cfg["resnet_loss"])

# %% [markdown]
# ## ECE before and after, on both halves
# Split each set in half, fit the calibrators on the calibration half, and measure ECE before and
# after on both halves. Platt scaling (MMLU only) takes the log-odds of the answer's probability
# over the four options: the paper feeds Platt's sigmoid "a logit estimate" of the sampled answer
# and restricts an MMLU confidence to the four options, renormalised (section 2.1), which removes
# the offset a raw answer logit carries from question to question.
# {py:func}`lib.ccc.pages.calibration.ece_grid` fits both and computes every ECE above.

# %%
platt_on = [m for m in models if m != vision]  # the MMLU models
results, tables = calibration.ece_grid(models, platt_on, cfg["n_bins"], cfg["seed"])
ece = results.pivot_table(
    index=["model", "T"], columns=["split", "stage"], values="ece")
ece.round(4)

# %% [markdown]
# Reliability diagrams (equal-count bins, 95% Wilson intervals): accuracy against mean confidence
# per bin, before and after calibration, on the calibration and the held-out half.

# %%
ccc_reliability_grid(tables, column="split", row="model", width=140)

# %% [markdown]
# Claim 1, "higher confidence, higher accuracy": the Spearman rank correlation between a bin's mean
# confidence and its accuracy, and the share of adjacent bins where accuracy does not drop
# (uncalibrated confidences, held-out half), by {py:func}`lib.ccc.pages.calibration.monotonicity`.

# %%
mono = calibration.monotonicity(tables)
mono.round(3)

# %% [markdown]
# ## The paper's numbers beside ours
# The paper's MMLU row is LLaMA-8B-Instruct (its own prompt and logits), calibrated by a method
# Table 1 does not name (section 2.1 uses Platt scaling for language tasks); ours is
# Llama-3.1-8B-Instruct with the released zero-shot logits, after Platt scaling on the answer's
# log-odds over the four options (and, in a second row, after temperature scaling).
# Its vision row is ImageNet with EVA02-L; ours is CIFAR-10 with a ResNet-50, so only the pattern
# (large drop, same on both halves) is comparable.

# %%
calibration.paper_table(results, vision).round(4).T

# %% [markdown]
# ## Which claims held at this scale
# Each verdict is computed from the numbers above by the rules of
# {py:func}`lib.ccc.pages.calibration.calibration_claims`: the book's one symmetric rule
# (`lib.report.t_verdict`, at infinite degrees of freedom: 1.96 closed-form errors) with the noise
# of each number -- an ECE on $n$ examples varies by
# about $0.5/\sqrt{n}$ ({py:func}`lib.ccc.pages.ece_se`), a Spearman correlation on $B$ bins by
# $\sqrt{1.06/(B-3)}$ on Fisher's z scale -- so a difference inside the noise is "inconclusive".
# The paper reports no errors, so its own table cannot be judged by the same rule.

# %%
claims = calibration.claims(results, mono)
claims

# %% [markdown]
# ## Provenance
# The numbers the tests and the landing page read (the claims, how many held, and every ECE of
# {py:func}`lib.ccc.pages.calibration.published`), and the settings.

# %%
held = int((claims["verdict"] == "held").sum())
numbers = calibration.published(results, mono)
page.publish_values(claims=claims.to_dict("records"), claims_held=held, **numbers)
{k: v for k, v in cfg.items() if k != "n_synthetic" or not REAL}

# %% [markdown]
# ## References
# {cite}`ccc2025`, {cite}`guo2017calibration`, {cite}`hendrycks2021mmlu`, {cite}`he2016resnet`,
# {cite}`grattafiori2024llama3`.

# %% [markdown] tags=["remove-cell"]
# The page ran to its end: remove the "did not finish" notice.

# %% tags=["remove-cell"]
page.finish("calibration")
