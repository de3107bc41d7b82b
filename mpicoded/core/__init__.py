"""The pure core (no MPI, no clock, no I/O): the Session that makes every decision of a run,
the events it takes and the instructions it gives, and the observers the MPI executor calls."""
