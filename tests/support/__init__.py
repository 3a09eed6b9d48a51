"""What the tests share and are not tests themselves: the fixtures (pytest plugins, loaded by
``tests/conftest.py``'s ``pytest_plugins``), data generators (``aggregate_differential``,
``sample_tables``, ``type_fidelity_data``, TPC-H loading), helpers (``counter_deltas``,
``fake_clock``, ``spark_sql_metrics``) and the applications some tests run in a child process
(``connect_client``, ``spark_metrics_app``, ``wheel_app``)."""
