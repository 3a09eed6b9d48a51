"""Everything that crosses between raptorx_py and the native jar, in one package: the names
both sides spell (``protocol``, twin of ``native/.../Protocol.scala``), the pushed
aggregation's JSON (``pushed_aggregation``), the marks a task's pickled partition carries
(``fragment_handoff``, ``jvm_read_handoff``, ``placement``) and what a scan reports
(``scan_report``). The formats, and the Scala file that mirrors each: docs/design/jvm-contract.md.
This module imports nothing: ``protocol`` sits in the bottom layer, the rest above the caches.
"""
