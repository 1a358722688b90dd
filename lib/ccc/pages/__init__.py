"""Paper 3's pages, one module per notebook (``lib/ccc/pages/<notebook>.py``). None trains on a
GPU: the paper's models' logits and predictions are loaded, not trained."""
