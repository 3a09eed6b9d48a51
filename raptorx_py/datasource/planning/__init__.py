"""The data source's planning side, in the driver (its planner) or a planning Python worker:
a read's options and schema, a scan's snapshot and table, pruning, listing and splits, each
split's read spec and fragment key, the query's shared values, the Spark catalog's requests.
It hands the reading side (``datasource.reading``) pickled read specs and never runs there."""
