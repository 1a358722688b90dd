"""calibration-book's library: the methods of four calibration papers, small, typed and tested.

One module per concept (SPEC section 0): ``metrics``, ``calibrate``, ``moe``, ``backbones``,
``robust``, ``fgr``, ``train``, ``l2d``, ``reweighted``, ``cascade``, ``cleaning``, ``data``,
``plots``, ``config``, ``runs``, ``report``. Modules are imported on use, so ``import lib`` is cheap.
"""

__version__ = "0.1.0"
