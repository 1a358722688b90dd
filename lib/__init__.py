"""calibration-book's library: the methods of four calibration papers, small, typed and tested.

Where things live (the book's API page lists every module):

* one package per paper -- :mod:`lib.moe` (paper 1), :mod:`lib.l2d` (paper 2), :mod:`lib.ccc`
  (paper 3), :mod:`lib.rr` (paper 4) and :mod:`lib.cross_paper` -- each holding the paper's methods,
  its pages' tables, claims and the paper's numbers, and a ``pages`` module with one
  :class:`lib.page.Page` per notebook;
* the shared layers: :mod:`lib.engine` (the one training loop, stacked runs, the run cache),
  :mod:`lib.calibration` (metrics and post-hoc calibrators), :mod:`lib.data` (loaders, augmentation,
  the JPEG filter), :mod:`lib.nets` (backbones, frozen extractors and offline ImageNet weights),
  :mod:`lib.features` (networks applied to data, cached);
* the book's plumbing: :mod:`lib.pages` (the registry of pages), :mod:`lib.config` (scales),
  :mod:`lib.page` (a page's first and last cell), :mod:`lib.report`, :mod:`lib.plots`,
  :mod:`lib.paper_scale` (published GPU runs on the pages), :mod:`lib.gpu` (the paper-scale queue
  and its windows), :mod:`lib.book` and :mod:`lib.cli`.

Modules are imported on use, so ``import lib`` is cheap.
"""

import warnings

# tqdm.auto (used by lib.moe.train and lib.data.image_files, and by cleanlab, timm and the Hugging Face hub)
# prints a TqdmWarning into every page executed by a kernel without ipywidgets, then falls back to
# the text bar anyway. One filter here silences it for all of them.
warnings.filterwarnings("ignore", message="IProgress not found", module="tqdm")

# In a notebook kernel, errors lib raises on purpose (bad parameter, missing data) show as one line.
from lib.notebook_errors import install as _install_notebook_errors  # noqa: E402

_install_notebook_errors()

__version__ = "0.1.0"
