"""Storage: filesystems for table URLs and the Hive directory layout (later: the listing,
footer and block cache tiers, each a module of its own)."""
