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
# # What the methods cost
#
# Two of the papers make claims about cost as well as calibration.
#
# - **Reweighted risk** {cite}`zhou2025reweighted`, section 4.2: the AU loss estimates the CDF of
#   the confidence scores with M bins, which costs O(nM) for a batch of n. The paper says this
#   "bypasses the sorting bottleneck" of the AURC loss, which ranks the batch in O(n log n). It
#   also says the AU loss "remains more scalable than kernel-based calibration objectives, which
#   typically suffer from quadratic O(n²) complexity" (KDE-XE {cite}`popordanoska2022kde`).
# - **Calibrated MoE** {cite}`wong2026moe`, Appendix D.1: FGR {cite}`fgr2025` needs two forward and two
#   backward passes per batch, plus DCT filtering on the CPU, which makes it "roughly 2.5x slower
#   per epoch than vanilla". The reference code of Robust Filtered also runs the backbone twice per
#   step. Our Robust Filtered needs one forward (`lib.moe.train`). Our FGR runs one forward on
#   the batch plus its few filtered copies, filters on the model's device, and gets both gradients
#   from one batched backward pass (`lib.moe.fgr`); only BatchNorm's batch statistics differ from the
#   reference's two passes.
#
# The loss timings below run live on the machine that builds this page. The training-step and
# epoch costs need minutes on an idle machine or a GPU, so `bench/` measures them on purpose and
# commits the JSON that this page reads. Each table says which device produced it.

# %% [markdown]
# ## Parameters
# `scale` picks the batch sizes and timing budget in `lib/scales.toml`. The `smoke` scale only
# checks that the page works. The `cpu` scale times batches from 128 to 65,536 in under a minute.

# %% tags=["parameters"]
scale: str = "cpu"  # smoke (seconds, CI) | cpu (default: n to 65,536) | paper (longer)
budget_s: float = 0.0  # seconds of timing per batch size; 0 keeps the scale's value

# %% [markdown] tags=["remove-cell"]
# The parameters are checked first: a misspelled name or a bad value stops the page here in one line;
# until the last cell has run, a notice below says that the page did not finish.

# %% tags=["remove-cell"]
from calibook import page

page.start("performance", globals())

# %% [markdown]
# Settings for this scale, and what produced the numbers.

# %%
import pandas as pd
import torch
from IPython.display import Markdown, display

from calibook import performance
from lib.engine import packed
from lib import config, plots
from lib.moe.experiment import METHOD_LABELS

plots.use_offline_renderer()
cfg = config.settings("performance", scale, budget_s=budget_s or None)
torch.set_num_threads(min(2, torch.get_num_threads()))
page.publish_scale(scale, performance.scale_line(cfg))
cfg

# %% [markdown]
# ## The AU loss against sorting and kernels
# We time forward plus backward on one batch of random logits for four losses, exactly as the
# reweighted-loss pages train with them. They are cross-entropy, the AU loss (M = 15 bins), the
# AURC loss (exact ranks from a sort) and KDE-XE. KDE-XE picks its bandwidth again on every
# batch, as in training, so we stop timing it at `kde_max_n`.

# %%
timing = performance.loss_timings(cfg)
ms = timing.assign(ms=timing["median_s"] * 1e3)
ms.pivot(index="n", columns="loss", values="ms").round(3)

# %% [markdown]
# On log-log axes a cost of n^k is a line of slope k. At small n a fixed cost per call hides the
# slope; at large n the lines show how each loss scales.

# %%
plots.line_chart(ms, "n", "ms", color="loss", log=True, x_title="batch size n",
                 y_title="forward + backward (ms, median)", width=420, height=280)

# %% [markdown]
# Fit the slopes over the large batches, and compare the AU loss with the sorting AURC loss at
# each size. A ratio below 1 means the AU loss is faster. KDE-XE is timed only up to `kde_max_n`;
# where fewer than two of its sizes reach the large batches, its slope comes from its two largest
# sizes: a small-batch slope, where fixed overheads still weigh (the plot above), set beside the
# others' large-batch ones. The claims table names the sizes each slope is fitted on.

# %%
timed = list(timing["loss"].unique())  # the losses timed above, in their order
scaling = performance.scaling_summary(timing, timed, cfg["exponent_from"])
exponents = pd.Series(scaling["exponents"], name="fitted exponent k (time ~ n^k)")
display(exponents.to_frame())
scaling["au_over_aurc"].round(3).to_frame().T

# %% [markdown]
# ## Training steps of paper 1: one forward, or two
# `bench/bench_methods.py` times one optimizer step of every method on a CIFAR-size batch of 128
# with the paper's ResNet-18 (256-d features) and a 4-expert head. It runs our implementation next
# to plain versions of the reference approach: Robust Filtered with the backbone run twice, and
# FGR with the DCT filter in numpy on the CPU.

# %%
results = {n: performance.bench_results(n) for n in performance.result_names()}
methods_record = results["methods_cpu"]
costs = performance.method_costs(methods_record)
device, threads = methods_record["device_name"], methods_record["threads"]
clock, steps = methods_record["clock"], methods_record["steps"]
print(f"device: {device} ({threads} threads); seconds are {clock} time, "
      f"median of {steps} timed steps per method")
costs.set_index("method").rename(index=METHOD_LABELS).round(3)

# %% [markdown]
# Each method's step time relative to Vanilla MoE, ours beside the reference approach.

# %%
bars = performance.method_bars(costs)  # the methods by their names in the paper
plots.bar_chart(bars, "method", "time per step / vanilla", color="implementation",
                sort=list(dict.fromkeys(bars["method"])), width=420)

# %% [markdown]
# ## Epoch times and the paper-scale grid
# `bench/bench_epoch.py` times the real training engine (`lib.moe.train` on `lib.engine`) for CIFAR-10H at 32 px and
# PACS at 224 px. It extrapolates an epoch from the timed steps, and from the epoch times of all
# trained methods it projects Table 1's grid (6 trained methods x 5 seeds x 50 epochs; MoCaE reuses
# Vanilla's runs). On a GPU it also
# reports the fraction of peak bf16 throughput and the host syncs per step. This page shows every
# `epoch_*.json` that has been committed, each under its device and how many steps it timed (the
# images are synthetic uint8 of the right size: timing does not depend on pixel values).

# %%
epoch_records = {k: r for k, r in results.items() if k.startswith("epoch_")}
gpu_measured = any("CPU" not in r["device"] for r in epoch_records.values())
for record in epoch_records.values():
    timed = "each epoch extrapolated from the steps its row timed"
    display(Markdown(f"**{record['device']}** ({timed})"))
    display(performance.epoch_table(record).round(3))

# %% [markdown]
# The projected time of Table 1's grid on each device, one run after another (training only).

# %%
grids = performance.grid_projection(epoch_records)
if grids is not None:
    display(grids)
else:
    print("No committed epoch benchmark timed every trained method: run python "
          "bench/bench_epoch.py --methods single vanilla robust robust_filtered fgr "
          "fgr_robust")

# %% [markdown]
# ## Packed runs: many runs as one model
# One run of the CIFAR-10H network at batch 128 reaches a few percent of an H200's bf16 peak (the
# table above), so the queue trains G runs of one architecture as one module,
# {py:class}`lib.engine.packed.Packed` (torch-uncertainty's packed ensembles with nothing shared): a
# convolution becomes one grouped convolution with G times the channels and groups, batch norm
# runs over G x C channels, a linear layer becomes a batched matmul, and run g's input and output
# are its own block of channels. {py:func}`lib.engine.loop.fit_packed` trains a pack; a run alone is
# its G = 1 case. A check on two small networks, each fed its own batch:

# %%
nn = torch.nn
torch.manual_seed(0)
layers = lambda: [nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(),  # noqa: E731
                  nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2)]
nets = [nn.Sequential(*layers()) for _ in range(2)]
pack = packed.Packed(nets)
xs = [torch.randn(5, 3, 8, 8) for _ in nets]
out = pack(packed.pack_inputs(xs))  # (G, batch, 2): run g's rows under index g
conv = pack.net[0]
print(f"packed convolution: {conv.in_channels} -> {conv.out_channels} channels, "
      f"{conv.groups} groups")
for g, (net, x) in enumerate(zip(nets, xs)):
    print(f"run {g}: largest |packed - alone| = {(out[g] - net(x)).abs().max():.1e}")

# %% [markdown]
# What training runs together buys, measured on an H200. First the engine's own epochs
# (`bench/bench_epoch.py --pack`, data pipeline and method step included): the committed H200
# record predates packed runs, so its rows are the engine's earlier `torch.func.vmap` stack
# (labelled so); the packed engine's rows join them when a lent GPU has measured them. Then a
# probe of the bare training step (`packed_step_probe-H200.json`, a reference measurement of the
# same network on random data: no data pipeline, losses or checkpoints) alone, packed, under a
# whole-step CUDA graph and under `torch.compile`: how far a packed step goes.

# %%
display(performance.pack_table(epoch_records))
performance.probe_table(performance.bench_results("packed_step_probe-H200")).round(3)

# %% [markdown]
# ## Which claims held
# Each verdict below is computed from the numbers above. The paper's FGR figure comes from its own
# GPU runs, so a CPU measurement cannot settle it.

# %%
claims = performance.claims(scaling, costs, methods_record)
page.publish_claims(claims)

# %% [markdown]
# Publish the numbers the tests and the landing page read, in one call.

# %%
published = performance.published(timing, scaling, costs, gpu_measured)
published["claims_held"] = int((claims["verdict"] == "held").sum())
page.publish_values(**published)
published

# %% [markdown]
# To measure on your own machine, run `python bench/bench_methods.py` and
# `python bench/bench_epoch.py` on an idle machine, or on a GPU. With every trained method timed,
# the second also projects Table 1's grid. Commit the JSON files under `bench/results` and this
# page will show them.
#
# ## References
# {cite}`zhou2025reweighted`, {cite}`popordanoska2022kde`, {cite}`wong2026moe`, {cite}`fgr2025`.

# %% [markdown] tags=["remove-cell"]
# The page ran to its end, so the "did not finish" notice at the top is removed.

# %% tags=["remove-cell"]
page.finish("performance")
