"""Servers the tests and the benchmarks start on loopback, shared by both (neither imports
the other): free ports, a Spark standalone cluster, an emulated S3 endpoint. Development
tools, not part of the ``raptorx_py`` package a user installs."""
