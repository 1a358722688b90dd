"""Data loaders for every experiment of the book; :mod:`lib.data.locate` holds the search order."""
