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
# *Paper 1, Table 1 and Figures 1, 3, E.2-E.4.* This page is a placeholder: the notebook that runs this experiment is written by a later
# issue. It already takes the book's standard parameters so the book, papermill and the tests can run it.

# %% [markdown]
# ## Parameters
# Papermill replaces the cell below (tagged `parameters`); `scale` picks the settings in `lib/scales.toml`.

# %% tags=["parameters"]
scale: str = "cpu"  # smoke (seconds, CI) | cpu (default: minutes on a laptop) | paper (GPU, paper settings)

# %% [markdown]
# The settings for this scale come from the one shared config; an unknown scale raises an error listing the valid ones.

# %%
from lib import config, report

cfg = config.settings("cifar10h", scale)
report.publish_scale(scale, "placeholder: nothing is computed on this page yet")
cfg
