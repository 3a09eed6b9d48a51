"""The data source's reading side, in the executors' Python workers: a task's splits read
through the node's storage tiers (``storage_tiers``, ``scan``), a pushed partial aggregation
evaluated per split (``aggregation``), the fragment result cache consulted and filled
(``task_reader``). It never imports the planning side (``datasource.planning``), which makes
what it reads; an import contract in ``pyproject.toml`` holds it to that."""
