"""Discrete-event simulator on the same codes, delays, decoders and master state as the runtime."""

from .engine import SimResult, Simulator, expected_iteration_time, simulate

__all__ = ["SimResult", "Simulator", "expected_iteration_time", "simulate"]
