"""calibration-book's library: the methods of four calibration papers, small, typed and tested.

One package per paper (:mod:`lib.moe`, :mod:`lib.l2d`, :mod:`lib.ccc`, :mod:`lib.rr`, and
:mod:`lib.cross_paper`), the shared layers (:mod:`lib.engine`, :mod:`lib.calibration`, :mod:`lib.data`,
:mod:`lib.nets`, :mod:`lib.features`) and the book's plumbing (CONTRIBUTING.md maps them; the book's API
page lists every module). Modules are imported on use, so ``import lib`` is cheap.
"""

import warnings

# tqdm.auto prints a TqdmWarning into every page executed by a kernel without ipywidgets (then uses the text bar)
warnings.filterwarnings("ignore", message="IProgress not found", module="tqdm")

__version__ = "0.1.0"
