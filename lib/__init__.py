"""calibration-book's library: the methods of four calibration papers, small, typed and tested.

One module per concept (SPEC section 0): ``metrics``, ``calibrate``, ``moe``, ``backbones``,
``robust``, ``fgr``, ``train``, ``l2d``, ``reweighted``, ``cascade``, ``cleaning``, ``data``,
``plots``, ``config``, ``runs``, ``report``, ``benchmarks``. Modules are imported on use, so
``import lib`` is cheap.
"""

import warnings

# Libraries the pages use (cleanlab; timm and the Hugging Face hub) import tqdm.auto, which prints a
# TqdmWarning into every page executed by a kernel without ipywidgets and then falls back to the
# text bar anyway. lib's own bars choose the text bar directly (lib.runs.progress_bar).
warnings.filterwarnings("ignore", message="IProgress not found", module="tqdm")

__version__ = "0.1.0"
