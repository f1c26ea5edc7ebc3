package eoslab.driver;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerInterceptor;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * The auto-commit's report (librdkafka's offset commit callback): the Java client has no
 * callback for its own auto-commits, but calls its interceptors' {@code onCommit} after every
 * successful commit. Installed only on auto-committing consumers, whose explicit commits the
 * host never asks for, so every report is the client's own (its timer's, or its close's).
 * Failed auto-commits are not reported by the Java client at all: the ledger shows only the
 * successful ones.
 */
public final class CommitReporter implements ConsumerInterceptor<byte[], byte[]> {
  /** The handle's client.id starts with this, then the handle. */
  static final String CLIENT_ID_PREFIX = "eoslab-";

  private String handle = "";

  @Override
  public void configure(Map<String, ?> configs) {
    Object clientId = configs.get(ConsumerConfig.CLIENT_ID_CONFIG);
    handle = String.valueOf(clientId).substring(CLIENT_ID_PREFIX.length());
  }

  @Override
  public ConsumerRecords<byte[], byte[]> onConsume(ConsumerRecords<byte[], byte[]> records) {
    return records;
  }

  @Override
  public void onCommit(Map<TopicPartition, OffsetAndMetadata> offsets) {
    ObjectNode event = Wire.event("commit");
    event.put("handle", handle);
    ArrayNode list = event.putArray("offsets");
    for (Map.Entry<TopicPartition, OffsetAndMetadata> offset : offsets.entrySet()) {
      list.addArray()
          .add(offset.getKey().topic())
          .add(offset.getKey().partition())
          .add(offset.getValue().offset());
    }
    Wire.emit(event);
  }

  @Override
  public void close() {}
}
