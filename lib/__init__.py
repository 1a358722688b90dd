"""calibration-book's library: the methods of four calibration papers, small, typed and tested.

One module per concept: ``metrics``, ``calibrate``, ``moe``, ``backbones``,
``robust``, ``fgr``, ``train``, ``l2d``, ``reweighted``, ``cascade``, ``cleaning``, ``data``,
``plots``, ``config``, ``runs``, ``report``, ``benchmarks``. Modules are imported on use, so
``import lib`` is cheap.
"""

import warnings

# tqdm.auto (used by lib.moe_train and lib.data.image_files, and by cleanlab, timm and the Hugging Face hub)
# prints a TqdmWarning into every page executed by a kernel without ipywidgets, then falls back to
# the text bar anyway. One filter here silences it for all of them.
warnings.filterwarnings("ignore", message="IProgress not found", module="tqdm")

__version__ = "0.1.0"
