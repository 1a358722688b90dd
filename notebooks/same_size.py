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
# # Routing between models of the same size
#
# *Paper 3, section 3.3 and Table 2* {cite}`ccc2025`. **What the paper claims:** with calibrated
# confidences, two models of comparable overall accuracy complement each other: routing each
# example to the model with the higher calibrated confidence advantage in its bin beats **both**
# models. The paper reports DeiT-B + TinyViT (about 82% each) reaching "up to 90%" on ImageNet, two
# EVA02-L models combining to **90.116%** on ImageNet (**96.266%** on its cleaned labels, Table 2),
# and gains for Qwen-32B + LLaMA-70B on MMLU.
#
# We test the claim on three real pairs: Llama-3.1 8B base with 8B instruct and 70B base with 70B
# instruct on MMLU {cite}`grattafiori2024llama3,hendrycks2021mmlu`, and two ResNet-50s trained on
# CIFAR-10 with cross-entropy and with focal loss {cite}`he2016resnet,mukhoti2020focal`.

# %% [markdown]
# ## Parameters
# `scale` picks the settings in `lib/scales.toml`; the others override one setting each.

# %% tags=["parameters"]
scale: str = "cpu"  # smoke (synthetic) | cpu (default: real logits) | paper (as cpu)
n_bins: int = 0  # equal-count bins on the first model's confidence; 0: the scale's
n_splits: int = 0  # random calibration/test splits; 0: the scale's

# %% [markdown] tags=["remove-cell"]
# Setup (hidden in the book): check the parameters -- a bad name or value stops the page here in
# one line, and until the last cell has run a notice says the page did not finish -- and import.

# %% tags=["remove-cell"]
from calibook import page

page.start("same_size", globals())

from lib import plots, report
from lib.config import settings
from lib.ccc.plots import cascade_chart
from lib.ccc.pages import released_runs_note, same_size

PAGE = same_size.PAGE

plots.use_offline_renderer()

# %% [markdown]
# ## The method
# The cascade's bins and advantages ([Cascading](cascading.ipynb)), with no cost to save: cut the
# first model's calibrated confidence into $B$ equal-count bins on the calibration half, compute each
# bin's advantage $a_b$ = mean second-model confidence - mean first-model confidence, and send a test
# example to the second model exactly when its bin has $a_b > 0$. Each example goes to the model
# that is more sure where it falls, so the pair can beat both models only if their calibrated
# confidences are comparable. Below, {py:func}`lib.ccc.cascade.same_size_route` on a pair built so
# that each model is right on the half where it is the more confident: routing is then perfect
# (accuracy 1, against 0.5 for each model alone), and the same rule in one line of numpy, with the
# advantages by hand: $a_0 = 0.7 - 0.4 > 0$ (to the second model), $a_1 = 0.7 - 0.9 < 0$ (first).

# %%
import numpy as np

from lib.ccc.cascade import same_size_route
from lib.ccc.confidence import ModelOutputs
from lib.report import show

high = np.arange(8) >= 4  # the first model is sure and right on these four
first = ModelOutputs(np.where(high, 0.9, 0.4), high, np.where(high, 0.9, 0.4), high)
second = ModelOutputs(np.full(8, 0.7), ~high, np.full(8, 0.7), ~high)
r = same_size_route(first, second, n_bins=2)
names = {"conf_small": "conf_first", "conf_large": "conf_second"}  # the cascade's names
show(r.table[["bin", "conf_small", "conf_large", "advantage"]].rename(columns=names))
adv = np.array([0.7 - 0.4, 0.7 - 0.9])  # a_b; bin 1 holds the first model's 0.9s
{"routed": r.accuracy,
 "by hand": np.where(adv[high.astype(int)] > 0, ~high, high).mean().item(),
 "first alone": r.acc_first, "second alone": r.acc_second}


# %% [markdown]
# ## Settings and data
# The three pairs as (logits of the first model, logits of the second, labels).

# %%
cfg = settings("same_size", scale, n_bins=n_bins or None, n_splits=n_splits or None)
scale_line = page.publish_scale(scale, PAGE.scale_summary(cfg))
note = released_runs_note(cfg["resnet_losses"], cfg["data"] == "real")
report.show(scale_line + "\n\n" + note)
pairs = PAGE.data(cfg)

# %% [markdown]
# For each pair and split: temperature-scale both models on the calibration half, then route each
# test example by the confidence advantage of its bin -- bins on the first model's confidence (the
# cascade's bins) and a joint variant with bins on both models -- and compare with each model alone
# and with the same rule on uncalibrated confidences ({py:func}`lib.ccc.pages.same_size.route_grid`;
# below, the means over the splits). "best point of the TS curve" is the highest test accuracy along
# the cascade curve of the calibrated pair (the chart below): the share of examples to keep on the
# first model chosen with hindsight on the test half itself, so an upper bound that flatters it, not
# a rule one could run.

# %%
res, curves = same_size.route_grid(
    pairs, cfg["n_splits"], cfg["n_bins"], cfg["joint_bins"], cfg["seed"])
same_size.summary(res).round(4)

# %% [markdown]
# The cascade curves of the first split (x: fraction of examples on the first model). A curve that
# rises above both of its end points means the pair beats either model.

# %%
chart = cascade_chart(curves, width=170, x_title="fraction kept on the first model")
plots.legend_below(chart, columns=3)

# %% [markdown]
# Gain of the routed pair over the better single model, mean and worst split.

# %%
same_size.gains(res).round(4)

# %% [markdown]
# ## The paper's numbers beside ours
# The paper's pairs (ImageNet ViTs, Qwen-32B + LLaMA-70B) are not available offline; we quote them
# for the size of the effect and set ours beside them.

# %%
same_size.paper_table(res, list(pairs))

# %% [markdown]
# ## Which claims held at this scale
# Each verdict is computed from the per-split numbers by
# {py:func}`lib.ccc.pages.same_size.claims`, with the book's one symmetric rule: both
# sides of each comparison share the splits, so the mean per-split difference is judged against its
# standard error times the Student-t critical value at n - 1 degrees of freedom (n splits), or
# against 1.96 of the test half's own closed-form errors when that bar is larger
# (`lib.report.t_verdict`). The paper reports no errors, so its own table cannot be judged by the
# same rule.

# %%
claims = same_size.claims(res, list(pairs))
claims

# %% [markdown]
# ## Provenance
# The numbers the tests and the landing page read (the claims, how many held, and the gains and
# accuracies of {py:func}`lib.ccc.pages.same_size.published`), and the settings.

# %%
held = int((claims["verdict"] == "held").sum())
numbers = same_size.published(res, list(pairs))
page.publish_values(claims=claims.to_dict("records"), claims_held=held, **numbers)
cfg

# %% [markdown]
# ## References
# {cite}`ccc2025`, {cite}`grattafiori2024llama3`, {cite}`hendrycks2021mmlu`, {cite}`he2016resnet`,
# {cite}`mukhoti2020focal`.

# %% [markdown] tags=["remove-cell"]
# The page ran to its end: remove the "did not finish" notice.

# %% tags=["remove-cell"]
page.finish("same_size")
