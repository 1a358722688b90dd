"""The cross-paper chapter's page (``lib/cross_paper/pages/cross_paper.py``)."""
