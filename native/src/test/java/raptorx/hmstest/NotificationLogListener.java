package raptorx.hmstest;

import java.util.Collections;
import java.util.Iterator;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hive.metastore.HiveMetaStore.HMSHandler;
import org.apache.hadoop.hive.metastore.MetaStoreEventListener;
import org.apache.hadoop.hive.metastore.api.MetaException;
import org.apache.hadoop.hive.metastore.api.NotificationEvent;
import org.apache.hadoop.hive.metastore.api.Partition;
import org.apache.hadoop.hive.metastore.events.AddPartitionEvent;
import org.apache.hadoop.hive.metastore.events.AlterPartitionEvent;
import org.apache.hadoop.hive.metastore.events.AlterTableEvent;
import org.apache.hadoop.hive.metastore.events.CreateDatabaseEvent;
import org.apache.hadoop.hive.metastore.events.CreateTableEvent;
import org.apache.hadoop.hive.metastore.events.DropDatabaseEvent;
import org.apache.hadoop.hive.metastore.events.DropPartitionEvent;
import org.apache.hadoop.hive.metastore.events.DropTableEvent;
import org.apache.hadoop.hive.metastore.events.InsertEvent;
import org.apache.hadoop.hive.metastore.events.ListenerEvent;
import org.apache.hadoop.hive.metastore.messaging.MessageFactory;
import org.apache.hadoop.hive.metastore.messaging.PartitionFiles;

/**
 * TEST CODE (never shipped in the provider jar): fills Hive Metastore 2.3's notification log
 * the way hcatalog's DbNotificationListener does on a production server, which pyspark's jars
 * lack. For every successful change it builds Hive's own JSON message (MessageFactory, the
 * "json-0.1" format) and appends it with RawStore.addNotificationEvent, which takes the next
 * id from NOTIFICATION_SEQUENCE. Configured with
 * hive.metastore.event.listeners=raptorx.hmstest.NotificationLogListener.
 *
 * Embedded Derby holds at most 32,700 characters in NOTIFICATION_LOG.MESSAGE (a production
 * database holds a CLOB): a longer message (an ADD_PARTITION of hundreds of partitions carries
 * every partition's Thrift JSON) is written as its db, table and timestamp with
 * "truncated":true, which is all a consumer that invalidates by name needs.
 *
 * Limits: runs after the change has committed (a plain, not transactional, listener), so a
 * server that dies in between loses that event; appends are serialised in this JVM only, as
 * in DbNotificationListener.
 */
public class NotificationLogListener extends MetaStoreEventListener {
  private static final Object LOG_LOCK = new Object();
  /** Derby's LONG VARCHAR, the type of NOTIFICATION_LOG.MESSAGE on the test server. */
  private static final int DERBY_MESSAGE_LIMIT = 32700;
  private final MessageFactory messages = MessageFactory.getInstance();

  public NotificationLogListener(Configuration conf) {
    super(conf);
  }

  @Override
  public void onCreateDatabase(CreateDatabaseEvent e) throws MetaException {
    append(e, MessageFactory.CREATE_DATABASE_EVENT, e.getDatabase().getName(), null,
        messages.buildCreateDatabaseMessage(e.getDatabase()).toString());
  }

  @Override
  public void onDropDatabase(DropDatabaseEvent e) throws MetaException {
    append(e, MessageFactory.DROP_DATABASE_EVENT, e.getDatabase().getName(), null,
        messages.buildDropDatabaseMessage(e.getDatabase()).toString());
  }

  @Override
  public void onCreateTable(CreateTableEvent e) throws MetaException {
    Iterator<String> noFiles = Collections.emptyIterator();
    append(e, MessageFactory.CREATE_TABLE_EVENT, e.getTable().getDbName(),
        e.getTable().getTableName(),
        messages.buildCreateTableMessage(e.getTable(), noFiles).toString());
  }

  @Override
  public void onAlterTable(AlterTableEvent e) throws MetaException {
    append(e, MessageFactory.ALTER_TABLE_EVENT, e.getOldTable().getDbName(),
        e.getOldTable().getTableName(),
        messages.buildAlterTableMessage(e.getOldTable(), e.getNewTable()).toString());
  }

  @Override
  public void onDropTable(DropTableEvent e) throws MetaException {
    append(e, MessageFactory.DROP_TABLE_EVENT, e.getTable().getDbName(),
        e.getTable().getTableName(), messages.buildDropTableMessage(e.getTable()).toString());
  }

  @Override
  public void onAddPartition(AddPartitionEvent e) throws MetaException {
    Iterator<PartitionFiles> noFiles = Collections.emptyIterator();
    append(e, MessageFactory.ADD_PARTITION_EVENT, e.getTable().getDbName(),
        e.getTable().getTableName(),
        messages.buildAddPartitionMessage(e.getTable(), e.getPartitionIterator(), noFiles)
            .toString());
  }

  @Override
  public void onAlterPartition(AlterPartitionEvent e) throws MetaException {
    append(e, MessageFactory.ALTER_PARTITION_EVENT, e.getTable().getDbName(),
        e.getTable().getTableName(),
        messages.buildAlterPartitionMessage(e.getTable(), e.getOldPartition(),
            e.getNewPartition()).toString());
  }

  @Override
  public void onDropPartition(DropPartitionEvent e) throws MetaException {
    Iterator<Partition> dropped = e.getPartitionIterator();
    append(e, MessageFactory.DROP_PARTITION_EVENT, e.getTable().getDbName(),
        e.getTable().getTableName(),
        messages.buildDropPartitionMessage(e.getTable(), dropped).toString());
  }

  @Override
  public void onInsert(InsertEvent e) throws MetaException {
    append(e, MessageFactory.INSERT_EVENT, e.getDb(), e.getTable(),
        messages.buildInsertMessage(e.getDb(), e.getTable(), e.getPartitionKeyValues(),
            e.getFiles().iterator()).toString());
  }

  /** A JSON string literal of a Hive name (letters, digits, underscores; quoted anyway). */
  private static String quote(String name) {
    return "\"" + name.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
  }

  /** Appends one event when the change succeeded (a failed change writes nothing). */
  private void append(ListenerEvent change, String type, String db, String table, String json)
      throws MetaException {
    if (!change.getStatus()) {
      return;
    }
    int now = (int) (System.currentTimeMillis() / 1000L);
    String message = json;
    if (message.length() > DERBY_MESSAGE_LIMIT) {
      message = "{\"server\":\"\",\"servicePrincipal\":\"\",\"db\":" + quote(db)
          + (table == null ? "" : ",\"table\":" + quote(table))
          + ",\"timestamp\":" + now + ",\"truncated\":true}";
    }
    NotificationEvent event = new NotificationEvent(0L, now, type, message);
    event.setDbName(db);
    if (table != null) {
      event.setTableName(table);
    }
    event.setMessageFormat(messages.getMessageFormat());
    synchronized (LOG_LOCK) {
      HMSHandler.getMSForConf(getConf()).addNotificationEvent(event);
    }
  }
}
