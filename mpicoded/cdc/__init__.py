"""Heterogeneous coded MapReduce (paper 002): allocation, coded shuffle plan, and an MPI job."""

from .allocation import Allocation, allocate, lemma1_load, optimal_sizes3
from .scheme import ShufflePlan, plan_shuffle, uncoded_plan

__all__ = ["Allocation", "ShufflePlan", "allocate", "lemma1_load", "optimal_sizes3",
           "plan_shuffle", "uncoded_plan"]
