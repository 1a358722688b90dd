"""Paper 4's pages, one module per notebook (``lib/rr/pages/<notebook>.py``)."""
