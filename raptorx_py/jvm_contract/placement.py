"""An input partition that carries its preferred executor to the JVM, and back whether it
ran there.

pyspark pickles every ``InputPartition`` (cloudpickle) into a ``PythonInputPartition`` whose
``preferredLocations()`` is empty. The native scan (``ArrowColumnarScan.scala``,
``Affinity.scala``; the strings: ``native/.../contract/Placement.scala``) reads the location
out of the pickled bytes without unpickling them: the partition's first attribute is the
ASCII string ``raptorx-affinity|<location>|<flag>``, which a pickle stores verbatim. On the
executor, the reader overwrites the one-byte flag (same length: the pickle stays valid) with
``P`` when the task runs on the executor it prefers, ``H`` when on another executor of that
executor's host (which shares the host's caches), ``F`` when on another host. Without the
native jar the flag stays ``-`` (unknown) and partitions have no preferred location.
"""

from __future__ import annotations

from pyspark.sql.datasource import InputPartition

from raptorx_py.jvm_contract import protocol

MARKER = protocol.AFFINITY_MARK
UNKNOWN = protocol.AFFINITY_UNKNOWN
PREFERRED = protocol.AFFINITY_PREFERRED
PREFERRED_HOST = protocol.AFFINITY_PREFERRED_HOST
FALLBACK = protocol.AFFINITY_FALLBACK


class PlacedPartition(InputPartition):
    """A task's splits (``value``) and the location of the executor they prefer."""

    def __init__(self, value, location: str):
        if "|" in location or not location.isascii():
            raise ValueError(f"preferred location {location!r} must be ASCII without '|'")
        # First, before ``value`` (the splits' URLs), so the JVM finds it first.
        self.placement = f"{MARKER}{location}|{UNKNOWN}"
        super().__init__(value)

    @property
    def location(self) -> str:
        return self.placement[len(MARKER) : -2]

    @property
    def ran(self) -> str:
        """``P``: on its preferred executor; ``H``: on another executor of its host; ``F``: on
        another host; ``-``: not known."""
        return self.placement[-1]

    def __repr__(self) -> str:
        return f"PlacedPartition({self.location}, {self.ran})"
