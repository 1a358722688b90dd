"""Thin experiment helpers the notebooks call: training loops, config grids, tables and claims."""
