"""Everything that crosses between raptorx_py and the native jar, in one package: the names
both sides spell (``protocol``), the pushed aggregation's JSON (``pushed_aggregation``), the
marks a task's pickled partition carries (``fragment_handoff``, ``jvm_read_handoff``,
``placement``) and what a scan reports (``scan_report``). Its Scala twin is the package
``raptorx.contract`` (``native/src/main/scala/raptorx/contract/``), one file per module here,
named alike in CamelCase (``tests/unit/test_jvm_contract_layout.py``). The formats, and the
Scala file that mirrors each: docs/design/jvm-contract.md. This module imports nothing:
``protocol`` sits in the bottom layer, the rest above the caches.
"""
