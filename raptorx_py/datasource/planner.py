"""Moved to ``raptorx_py.datasource.planning.planner``. This name stays for ``benchmarks/``,
which imports it, until the benchmarks use the new path (then delete this file). Importing it
gives the moved module itself (the same object: patching either patches both)."""

import sys

from raptorx_py.datasource.planning import planner

sys.modules[__name__] = planner
