package eoslab.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * One Java consumer of the session, shaped as librdkafka's: {@code consume(max, timeout)} hands
 * out at most {@code max} records (the rest of a poll wait in the handle, and are dropped when
 * their partition is revoked or sought), rebalance callbacks are run by the host while the poll
 * waits (an event, then commands, until {@code resume}), and with {@code eof} a partition whose
 * position reached its end offset (the last stable offset under read_committed) gives one
 * end-of-partition item each time it gets there, as librdkafka's enable.partition.eof: the Java
 * client has no such event, so the handle asks for the end offsets when a poll came back empty.
 * Each record goes with its partition's end as the client's fetches last said ({@code hw}): the
 * position after the poll plus {@code currentLag}, the high watermark (the last stable offset
 * under read_committed, the only end the Java client tells); a client without {@code
 * currentLag} (before 3.0) tells none.
 */
final class ConsumerHandle {
  private static final long END_CHECK_INTERVAL_MS = 200;
  private static final Duration CALL = Duration.ofSeconds(30);

  private final String handle;
  private final KafkaConsumer<byte[], byte[]> consumer;
  private final boolean eof;
  private final ArrayDeque<ConsumerRecord<byte[], byte[]>> buffered = new ArrayDeque<>();
  /**
   * Per partition, the position its last end-of-partition item named: its end is reached again
   * only at another position (a record handed out, a seek; or a transaction's marker, which moves
   * the position without a record).
   */
  private final Map<TopicPartition, Long> endGiven = new HashMap<>();
  private final ArrayDeque<ObjectNode> ends = new ArrayDeque<>();
  private final Driver driver;
  private final Map<TopicPartition, Long> fetchedEnds = new HashMap<>();
  private final Method currentLag = lagMethod();
  private long lastEndCheck;

  ConsumerHandle(String handle, Properties config, boolean eof, Driver driver) {
    this.handle = handle;
    this.eof = eof;
    this.driver = driver;
    this.consumer = new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer());
  }

  void subscribe(List<String> topics) {
    consumer.subscribe(
        topics,
        new ConsumerRebalanceListener() {
          @Override
          public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            rebalance("revoke", partitions);
          }

          @Override
          public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            rebalance("assign", partitions);
          }

          @Override
          public void onPartitionsLost(Collection<TopicPartition> partitions) {
            rebalance("lost", partitions);
          }
        });
  }

  /** The host runs its callback now, inside the poll, as librdkafka's callbacks run. */
  private void rebalance(String kind, Collection<TopicPartition> partitions) {
    if (partitions.isEmpty()) {
      return;
    }
    if (!kind.equals("assign")) {
      forget(partitions);
    }
    endGiven.keySet().removeAll(partitions);
    ObjectNode event = Wire.event("rebalance");
    event.put("handle", handle);
    event.put("kind", kind);
    event.set("partitions", positions(partitions));
    Wire.emit(event);
    driver.serveUntilResume();
  }

  void assign(JsonNode partitions) {
    List<TopicPartition> assigned = new ArrayList<>();
    for (JsonNode position : partitions) {
      assigned.add(partition(position));
    }
    consumer.assign(assigned);
    for (JsonNode position : partitions) {
      seek(position);
    }
  }

  ArrayNode consume(int max, long timeoutMs) {
    ArrayNode items = Wire.array();
    if (buffered.isEmpty()) {
      ConsumerRecords<byte[], byte[]> polled = consumer.poll(Duration.ofMillis(timeoutMs));
      for (ConsumerRecord<byte[], byte[]> record : polled) {
        buffered.add(record);
      }
      learnEnds(polled.partitions());
    }
    while (items.size() < max && !buffered.isEmpty()) {
      ConsumerRecord<byte[], byte[]> record = buffered.poll();
      TopicPartition where = new TopicPartition(record.topic(), record.partition());
      ObjectNode item = items.addObject();
      item.put("t", record.topic());
      item.put("p", record.partition());
      item.put("o", record.offset());
      item.put("k", Wire.text(record.key()));
      item.put("v", Wire.text(record.value()));
      item.put("ts", record.timestamp());
      Long end = fetchedEnds.get(where);
      if (end != null) {
        item.put("hw", end);
      }
    }
    if (eof && items.isEmpty() && ends.isEmpty()) {
      reachedEnds();
    }
    while (items.size() < max && !ends.isEmpty()) {
      items.add(ends.poll());
    }
    return items;
  }

  private static Method lagMethod() {
    try {
      return KafkaConsumer.class.getMethod("currentLag", TopicPartition.class);
    } catch (NoSuchMethodException absent) {
      return null;
    }
  }

  /** The end of each partition with records just polled, as the client's last fetch said. */
  private void learnEnds(Set<TopicPartition> polled) {
    if (currentLag == null) {
      return;
    }
    for (TopicPartition where : polled) {
      try {
        OptionalLong lag = (OptionalLong) currentLag.invoke(consumer, where);
        if (lag.isPresent()) {
          fetchedEnds.put(where, consumer.position(where, CALL) + lag.getAsLong());
        }
      } catch (ReflectiveOperationException | RuntimeException unknown) {
        fetchedEnds.remove(where);
      }
    }
  }

  /** Partitions whose end the position reached, each an end-of-partition item once. */
  private void reachedEnds() {
    long now = System.currentTimeMillis();
    if (now - lastEndCheck < END_CHECK_INTERVAL_MS) {
      return;
    }
    lastEndCheck = now;
    Set<TopicPartition> paused = consumer.paused();
    Set<TopicPartition> candidates = new HashSet<>();
    for (TopicPartition where : consumer.assignment()) {
      Long given = endGiven.get(where);
      if (!paused.contains(where) && (given == null || given != consumer.position(where, CALL))) {
        candidates.add(where);
      }
    }
    if (candidates.isEmpty()) {
      return;
    }
    Map<TopicPartition, Long> endOffsets = consumer.endOffsets(candidates, CALL);
    for (Map.Entry<TopicPartition, Long> end : endOffsets.entrySet()) {
      TopicPartition where = end.getKey();
      long position = consumer.position(where, CALL);
      if (position >= end.getValue()) {
        endGiven.put(where, position);
        ObjectNode item = Wire.object();
        item.put("t", where.topic());
        item.put("p", where.partition());
        item.put("o", position);
        item.put("eof", true);
        ends.add(item);
      }
    }
  }

  /** Commit offsets; one result per partition: the Java client fails a commit as a whole. */
  ArrayNode commit(JsonNode offsets) {
    Map<TopicPartition, OffsetAndMetadata> request = new HashMap<>();
    for (JsonNode position : offsets) {
      request.put(partition(position), new OffsetAndMetadata(position.get(2).asLong()));
    }
    ObjectNode error = null;
    try {
      consumer.commitSync(request, CALL);
    } catch (RuntimeException failed) {
      error = Failure.of(failed, Failure.Context.CALL, null, false);
    }
    ArrayNode results = Wire.array();
    for (JsonNode position : offsets) {
      ArrayNode result = results.addArray();
      result.add(position.get(0)).add(position.get(1)).add(position.get(2));
      result.add(error == null ? Wire.JSON.nullNode() : error);
    }
    return results;
  }

  ArrayNode committed(JsonNode partitions, long timeoutMs) {
    Set<TopicPartition> asked = new HashSet<>();
    for (JsonNode position : partitions) {
      asked.add(partition(position));
    }
    Map<TopicPartition, OffsetAndMetadata> committed =
        consumer.committed(asked, Duration.ofMillis(timeoutMs));
    ArrayNode answer = Wire.array();
    for (TopicPartition where : asked) {
      OffsetAndMetadata offset = committed.get(where);
      answer.addArray().add(where.topic()).add(where.partition()).add(offset == null ? -1001L : offset.offset());
    }
    return answer;
  }

  void seek(JsonNode position) {
    TopicPartition where = partition(position);
    long offset = position.get(2).asLong();
    forget(List.of(where));
    endGiven.remove(where);
    if (offset == -2) {
      consumer.seekToBeginning(List.of(where));
    } else if (offset == -1) {
      consumer.seekToEnd(List.of(where));
    } else if (offset >= 0) {
      consumer.seek(where, offset);
    }
  }

  void pause(JsonNode partitions, boolean paused) {
    List<TopicPartition> chosen = new ArrayList<>();
    for (JsonNode position : partitions) {
      chosen.add(partition(position));
    }
    if (paused) {
      consumer.pause(chosen);
    } else {
      consumer.resume(chosen);
    }
  }

  ArrayNode watermarks(JsonNode position, long timeoutMs) {
    TopicPartition where = partition(position);
    Duration timeout = Duration.ofMillis(timeoutMs);
    long low = consumer.beginningOffsets(List.of(where), timeout).get(where);
    long high = consumer.endOffsets(List.of(where), timeout).get(where);
    return Wire.array().add(low).add(high);
  }

  ConsumerGroupMetadata groupMetadata() {
    return consumer.groupMetadata();
  }

  void close(long timeoutMs) {
    consumer.close(Duration.ofMillis(timeoutMs));
  }

  private void forget(Collection<TopicPartition> partitions) {
    ends.removeIf(item -> partitions.contains(new TopicPartition(item.get("t").asText(), item.get("p").asInt())));
    Iterator<ConsumerRecord<byte[], byte[]>> records = buffered.iterator();
    while (records.hasNext()) {
      ConsumerRecord<byte[], byte[]> record = records.next();
      if (partitions.contains(new TopicPartition(record.topic(), record.partition()))) {
        records.remove();
      }
    }
  }

  static TopicPartition partition(JsonNode position) {
    return new TopicPartition(position.get(0).asText(), position.get(1).asInt());
  }

  static ArrayNode positions(Collection<TopicPartition> partitions) {
    ArrayNode list = Wire.array();
    for (TopicPartition where : partitions) {
      list.addArray().add(where.topic()).add(where.partition());
    }
    return list;
  }
}
