"""Deterministic simulation of the replica cores (see ``simulator.py``) and a
randomized schedule explorer (``python -m replica.sim.explore``)."""

from .simulator import CLIENT, CTL, Op, Simulator

__all__ = ["Simulator", "Op", "CLIENT", "CTL"]
