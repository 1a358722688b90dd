"""Paper 2's pages, one module per notebook (``lib/l2d/pages/<notebook>.py``)."""
