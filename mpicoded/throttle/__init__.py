"""Real slow ranks or hosts: cpu cgroups that hold them to a share of one core (``--throttle``).
``python -m mpicoded.throttle`` manages the host groups of ``launch/netns-cluster.sh``."""
