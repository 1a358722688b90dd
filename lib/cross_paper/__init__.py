"""The cross-paper chapter: the four papers' calibration methods on the same logits.

:mod:`~lib.cross_paper.study` computes the comparison, :mod:`~lib.cross_paper.claims` judges its
expectations; :mod:`~lib.cross_paper.pages` holds its :class:`~lib.page.Page`.
"""
