"""The metastore's SQL schema, laid out after the Hive Metastore's.

Table and column names follow HMS (DBS, TBLS, COLUMNS_V2, PARTITION_KEYS, PARTITIONS,
PARTITION_KEY_VALS, PARTITION_PARAMS, TABLE_PARAMS, PART_COL_STATS, TAB_COL_STATS).

Versions. 1: the catalogue above (``DDL_V1``). 2 adds the transactional tables next to it
(``DDL_V2``): TXNS, TXN_TO_WRITE_ID, NEXT_WRITE_ID, NOTIFICATION_LOG, NOTIFICATION_SEQUENCE,
HIVE_LOCKS, NEXT_LOCK_ID. A version is only ever *added* tables, indexes and seed rows
(``CREATE ... IF NOT EXISTS``, ``SEED``), so opening an older database upgrades it in place, in
the transaction that checks the version. 3 adds TXN_TIMEOUTS (``DDL_V3``): each transaction's
own timeout, recorded when it opens (a transaction opened before the upgrade has no row and
expires after the expiring client's timeout, as before). 4 adds LOCK_TIMEOUTS (``DDL_V4``):
the same for each lock request taken outside a transaction (one taken before the upgrade
expires after the expiring client's timeout), and TXN_WRITE_PATHS, what each managed write
created on storage (a write from before the upgrade recorded nothing: the cleaner leaves its
directories). 5 adds PARTITION_FORMATS (``DDL_V5``): the format of each partition whose files
are not in its table's format. Partitions of managed tables record
the write id that
last wrote them as the partition parameter ``writeId`` (no column change: version 1 databases
need no ALTER).

Differences from HMS, on purpose: the storage descriptor is folded into TBLS/PARTITIONS
(location and format only: a table's format in TBLS, a partition's own in PARTITION_FORMATS),
and column statistics keep one
LOW_VALUE/HIGH_VALUE text pair in a canonical per-type form (see
``hive.column_types.encode_value``) instead of one column per value type.

The DDL is portable between SQLite and PostgreSQL: ``{id}`` is the auto-increment primary key
type, substituted per backend. Times in the version 2 tables are milliseconds since the epoch
(Hive's), except NOTIFICATION_LOG.EVENT_TIME, which is seconds (Hive's too).
"""

SCHEMA_VERSION = 5

DDL_V1 = [
    """CREATE TABLE IF NOT EXISTS VERSION (
        VER_ID INTEGER PRIMARY KEY,
        SCHEMA_VERSION INTEGER NOT NULL,
        VERSION_COMMENT TEXT)""",
    """CREATE TABLE IF NOT EXISTS DBS (
        DB_ID {id},
        NAME TEXT NOT NULL UNIQUE,
        DB_DESC TEXT,
        DB_LOCATION_URI TEXT,
        CREATE_TIME BIGINT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS TBLS (
        TBL_ID {id},
        DB_ID BIGINT NOT NULL REFERENCES DBS (DB_ID),
        TBL_NAME TEXT NOT NULL,
        TBL_TYPE TEXT NOT NULL CHECK (TBL_TYPE IN ('MANAGED_TABLE', 'EXTERNAL_TABLE')),
        LOCATION TEXT NOT NULL,
        INPUT_FORMAT TEXT NOT NULL DEFAULT 'parquet',
        CREATE_TIME BIGINT NOT NULL,
        UNIQUE (DB_ID, TBL_NAME))""",
    """CREATE TABLE IF NOT EXISTS TABLE_PARAMS (
        TBL_ID BIGINT NOT NULL REFERENCES TBLS (TBL_ID) ON DELETE CASCADE,
        PARAM_KEY TEXT NOT NULL,
        PARAM_VALUE TEXT,
        PRIMARY KEY (TBL_ID, PARAM_KEY))""",
    """CREATE TABLE IF NOT EXISTS COLUMNS_V2 (
        TBL_ID BIGINT NOT NULL REFERENCES TBLS (TBL_ID) ON DELETE CASCADE,
        COLUMN_NAME TEXT NOT NULL,
        TYPE_NAME TEXT NOT NULL,
        INTEGER_IDX INTEGER NOT NULL,
        PRIMARY KEY (TBL_ID, COLUMN_NAME))""",
    """CREATE TABLE IF NOT EXISTS PARTITION_KEYS (
        TBL_ID BIGINT NOT NULL REFERENCES TBLS (TBL_ID) ON DELETE CASCADE,
        PKEY_NAME TEXT NOT NULL,
        PKEY_TYPE TEXT NOT NULL,
        INTEGER_IDX INTEGER NOT NULL,
        PRIMARY KEY (TBL_ID, PKEY_NAME))""",
    """CREATE TABLE IF NOT EXISTS PARTITIONS (
        PART_ID {id},
        TBL_ID BIGINT NOT NULL REFERENCES TBLS (TBL_ID) ON DELETE CASCADE,
        PART_NAME TEXT NOT NULL,
        LOCATION TEXT NOT NULL,
        CREATE_TIME BIGINT NOT NULL,
        UNIQUE (TBL_ID, PART_NAME))""",
    """CREATE TABLE IF NOT EXISTS PARTITION_KEY_VALS (
        PART_ID BIGINT NOT NULL REFERENCES PARTITIONS (PART_ID) ON DELETE CASCADE,
        PART_KEY_VAL TEXT,
        INTEGER_IDX INTEGER NOT NULL,
        PRIMARY KEY (PART_ID, INTEGER_IDX))""",
    """CREATE TABLE IF NOT EXISTS PARTITION_PARAMS (
        PART_ID BIGINT NOT NULL REFERENCES PARTITIONS (PART_ID) ON DELETE CASCADE,
        PARAM_KEY TEXT NOT NULL,
        PARAM_VALUE TEXT,
        PRIMARY KEY (PART_ID, PARAM_KEY))""",
    """CREATE TABLE IF NOT EXISTS PART_COL_STATS (
        PART_ID BIGINT NOT NULL REFERENCES PARTITIONS (PART_ID) ON DELETE CASCADE,
        COLUMN_NAME TEXT NOT NULL,
        COLUMN_TYPE TEXT NOT NULL,
        NUM_NULLS BIGINT,
        LOW_VALUE TEXT,
        HIGH_VALUE TEXT,
        LAST_ANALYZED BIGINT NOT NULL,
        PRIMARY KEY (PART_ID, COLUMN_NAME))""",
    """CREATE TABLE IF NOT EXISTS TAB_COL_STATS (
        TBL_ID BIGINT NOT NULL REFERENCES TBLS (TBL_ID) ON DELETE CASCADE,
        COLUMN_NAME TEXT NOT NULL,
        COLUMN_TYPE TEXT NOT NULL,
        NUM_NULLS BIGINT,
        LOW_VALUE TEXT,
        HIGH_VALUE TEXT,
        LAST_ANALYZED BIGINT NOT NULL,
        PRIMARY KEY (TBL_ID, COLUMN_NAME))""",
    "CREATE INDEX IF NOT EXISTS PARTITIONS_TBL ON PARTITIONS (TBL_ID)",
]

#: Transactions, write ids, the notification log and locks (HMS names; see the modules
#: ``transactions``, ``notifications`` and ``locks`` for what each column means).
DDL_V2 = [
    # TXN_STATE: 'o' open, 'c' committed, 'a' aborted (Hive's letters). Committed rows are
    # kept, so a second commit is refused by name rather than reported as unknown.
    """CREATE TABLE IF NOT EXISTS TXNS (
        TXN_ID {id},
        TXN_STATE TEXT NOT NULL CHECK (TXN_STATE IN ('o', 'c', 'a')),
        TXN_STARTED BIGINT NOT NULL,
        TXN_LAST_HEARTBEAT BIGINT NOT NULL,
        TXN_USER TEXT,
        TXN_HOST TEXT,
        TXN_AGENT_INFO TEXT)""",
    "CREATE INDEX IF NOT EXISTS TXNS_STATE ON TXNS (TXN_STATE)",
    """CREATE TABLE IF NOT EXISTS TXN_TO_WRITE_ID (
        T2W_TXNID BIGINT NOT NULL REFERENCES TXNS (TXN_ID),
        T2W_DATABASE TEXT NOT NULL,
        T2W_TABLE TEXT NOT NULL,
        T2W_WRITEID BIGINT NOT NULL,
        PRIMARY KEY (T2W_DATABASE, T2W_TABLE, T2W_WRITEID),
        UNIQUE (T2W_TXNID, T2W_DATABASE, T2W_TABLE))""",
    # The next write id of each table, by name. Never reset, not even by a drop: a table
    # recreated at the same location must not reuse the numbers of old delta_<wid> dirs.
    """CREATE TABLE IF NOT EXISTS NEXT_WRITE_ID (
        NWI_DATABASE TEXT NOT NULL,
        NWI_TABLE TEXT NOT NULL,
        NWI_NEXT BIGINT NOT NULL,
        PRIMARY KEY (NWI_DATABASE, NWI_TABLE))""",
    """CREATE TABLE IF NOT EXISTS NOTIFICATION_LOG (
        EVENT_ID BIGINT PRIMARY KEY,
        EVENT_TIME BIGINT NOT NULL,
        EVENT_TYPE TEXT NOT NULL,
        DB_NAME TEXT,
        TBL_NAME TEXT,
        TXN_ID BIGINT,
        WRITE_ID BIGINT,
        MESSAGE TEXT NOT NULL,
        MESSAGE_FORMAT TEXT NOT NULL)""",
    # One row: the next EVENT_ID. Updated in the transaction that appends the event, so ids
    # are handed out in commit order and a rolled-back change leaves no gap.
    """CREATE TABLE IF NOT EXISTS NOTIFICATION_SEQUENCE (
        NNI_ID BIGINT PRIMARY KEY,
        NEXT_EVENT_ID BIGINT NOT NULL)""",
    # HL_LOCK_STATE is always 'a' (acquired): a refused request is not stored, the client
    # retries (see locks.py). HL_LOCK_TYPE: 'r' shared read, 'w' shared write, 'e' exclusive.
    """CREATE TABLE IF NOT EXISTS HIVE_LOCKS (
        HL_LOCK_EXT_ID BIGINT NOT NULL,
        HL_LOCK_INT_ID BIGINT NOT NULL,
        HL_TXNID BIGINT,
        HL_DB TEXT NOT NULL,
        HL_TABLE TEXT,
        HL_PARTITION TEXT,
        HL_LOCK_STATE TEXT NOT NULL,
        HL_LOCK_TYPE TEXT NOT NULL CHECK (HL_LOCK_TYPE IN ('r', 'w', 'e')),
        HL_LAST_HEARTBEAT BIGINT NOT NULL,
        HL_ACQUIRED_AT BIGINT NOT NULL,
        HL_USER TEXT,
        HL_HOST TEXT,
        HL_AGENT_INFO TEXT,
        PRIMARY KEY (HL_LOCK_EXT_ID, HL_LOCK_INT_ID))""",
    "CREATE INDEX IF NOT EXISTS HIVE_LOCKS_DB ON HIVE_LOCKS (HL_DB)",
    "CREATE INDEX IF NOT EXISTS HIVE_LOCKS_TXNID ON HIVE_LOCKS (HL_TXNID)",
    """CREATE TABLE IF NOT EXISTS NEXT_LOCK_ID (
        NL_ID BIGINT PRIMARY KEY,
        NL_NEXT BIGINT NOT NULL)""",
]

#: The timeout (ms) of each transaction, from the hive.txn.timeout of the client that opened
#: it: expiry uses the transaction's own, never the expiring client's (a client with a short
#: timeout must not abort another's live transaction). A table of its own, not a TXNS column,
#: so the upgrade stays "add tables only".
DDL_V3 = [
    """CREATE TABLE IF NOT EXISTS TXN_TIMEOUTS (
        TT_TXNID BIGINT PRIMARY KEY REFERENCES TXNS (TXN_ID),
        TT_TIMEOUT_MS BIGINT NOT NULL)""",
]

#: The timeout (ms) of each lock request taken outside a transaction, from the
#: hive.txn.timeout of the client that took it: such a lock expires after its own timeout
#: without a heartbeat, as a transaction does (a transaction's locks go with it). Removed
#: with the lock (unlock, expiry).
#: TXN_WRITE_PATHS: what each managed write created on storage (``write_paths``): the
#: directories it created ('d'), the files it placed ('f') and its staging directory ('s'),
#: as URLs; the cleaner removes
#: only what these name for this metastore's aborted transactions.
DDL_V4 = [
    """CREATE TABLE IF NOT EXISTS LOCK_TIMEOUTS (
        LT_LOCK_EXT_ID BIGINT PRIMARY KEY,
        LT_TIMEOUT_MS BIGINT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS TXN_WRITE_PATHS (
        TWP_TXNID BIGINT NOT NULL REFERENCES TXNS (TXN_ID),
        TWP_DATABASE TEXT NOT NULL,
        TWP_TABLE TEXT NOT NULL,
        TWP_KIND TEXT NOT NULL CHECK (TWP_KIND IN ('d', 'f', 's')),
        TWP_PATH TEXT NOT NULL,
        PRIMARY KEY (TWP_TXNID, TWP_PATH))""",
    "CREATE INDEX IF NOT EXISTS TXN_WRITE_PATHS_TABLE ON TXN_WRITE_PATHS (TWP_DATABASE, TWP_TABLE)",
]

#: The format of each partition whose data files are not in its table's (Hive keeps a storage
#: descriptor per partition; a table may hold ORC and Parquet partitions): one row per such
#: partition, none for those in the table's format. Removed with the partition.
DDL_V5 = [
    """CREATE TABLE IF NOT EXISTS PARTITION_FORMATS (
        PART_ID BIGINT PRIMARY KEY REFERENCES PARTITIONS (PART_ID) ON DELETE CASCADE,
        INPUT_FORMAT TEXT NOT NULL)""",
]

DDL = DDL_V1 + DDL_V2 + DDL_V3 + DDL_V4 + DDL_V5

#: Rows the version 2 tables need, inserted only where missing (portable: no upsert).
SEED = [
    "INSERT INTO NOTIFICATION_SEQUENCE (NNI_ID, NEXT_EVENT_ID) SELECT 1, 1 "
    "WHERE NOT EXISTS (SELECT 1 FROM NOTIFICATION_SEQUENCE)",
    "INSERT INTO NEXT_LOCK_ID (NL_ID, NL_NEXT) SELECT 1, 1 "
    "WHERE NOT EXISTS (SELECT 1 FROM NEXT_LOCK_ID)",
]
