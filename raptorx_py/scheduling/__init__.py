"""Where splits should run: soft-affinity scheduling (``scheduling.affinity``)."""
