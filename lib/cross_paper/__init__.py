"""The cross-paper chapter: the four papers' calibration methods on the same logits.

Its one page, :mod:`lib.cross_paper.pages.cross_paper`, holds the comparison, its claims and the
numbers it publishes.
"""
