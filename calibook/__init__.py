"""The book's workshop: what makes, schedules, caches, ships and publishes runs and builds the book.

``lib`` holds what a reader of a page learns from (the papers' formulas, metrics, data, networks, the
training loop, each page's experiment and claims); ``calibook`` holds the machinery around it: the
notebooks' first and last cells (:mod:`calibook.page`), the page registry, the paper-scale queue and
GPU windows (:mod:`calibook.gpu`), published results, the ledger, the book build and the command line
(``python -m calibook``). ``calibook`` imports ``lib``; ``lib`` imports nothing from ``calibook``
(``tests/unit/test_layers.py``).
"""

# In a notebook kernel, errors lib or calibook raise on purpose (bad parameter, missing data) show as one line.
from calibook.notebook_errors import install as _install_notebook_errors

_install_notebook_errors()


class _RunStore:
    """calibook.runs as lib's run store, imported on first use (it imports torch)."""

    def __getattr__(self, name: str):  # noqa: ANN204
        import calibook.runs

        return getattr(calibook.runs, name)


from lib.engine import cache as _cache  # noqa: E402

_cache.install(_RunStore())
