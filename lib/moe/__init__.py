"""Paper 1, calibrated mixture-of-experts under distribution shift: its methods and its pages.

Methods: :mod:`~lib.moe.heads` (the MoE head and its per-example losses), :mod:`~lib.moe.robust`
(Robust MoE, Robust Filtered), :mod:`~lib.moe.fgr` and :mod:`~lib.data.jpeg` (FGR and its filter),
:mod:`~lib.moe.mocae`, :mod:`~lib.moe.methods` (each method's network, loss and step), :mod:`~lib.moe.config`,
:mod:`~lib.moe.train`, :mod:`~lib.moe.grid` (grids trained stacked), :mod:`~lib.moe.evaluate`,
:mod:`~lib.moe.record`, :mod:`~lib.moe.theory` and :mod:`~lib.moe.routed_population` (sections 3-5).

Pages: one module per notebook, ``lib.moe.pages.<notebook>`` (its plan, data, tables, claims and
the paper's numbers it quotes), on what they share: :mod:`~lib.moe.experiment` (data and run grids),
:mod:`~lib.moe.tables`, :mod:`~lib.moe.claims` (claims (i)-(iv)), :mod:`~lib.moe.paper` (the paper's
sentences); figures in :mod:`~lib.moe.plots`."""
