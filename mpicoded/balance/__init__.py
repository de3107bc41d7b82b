"""Load splits for heterogeneous workers (paper 000): how many of an iteration's KΩ tasks each
worker runs, from declared or learnt speeds."""
