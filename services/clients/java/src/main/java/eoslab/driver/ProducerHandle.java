package eoslab.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * One Java producer of the session: sends, delivery reports, the transactional calls, and its
 * producer id and epoch.
 *
 * <p>A transactional call runs on a thread of its own and the host waits for it at most the
 * call's timeout (librdkafka's calls take one; the Java client's only {@code max.block.ms}): a
 * call that runs out of time answers {@code _TIMED_OUT} (retriable) and goes on, and the same
 * call asked again waits for that run instead of starting another, as a Java application
 * retrying after a TimeoutException resumes the same operation.
 */
final class ProducerHandle {
  private final String handle;
  private final KafkaProducer<byte[], byte[]> producer;
  private final Object transactionManager;
  private final ExecutorService calls;
  private final Map<String, Future<?>> pending = new HashMap<>();
  private final ScheduledExecutorService stats;
  private final AtomicBoolean fatalReported = new AtomicBoolean();

  ProducerHandle(String handle, Properties config, long statsIntervalMs) {
    this.handle = handle;
    this.producer = new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer());
    this.transactionManager = field(producer, "transactionManager");
    this.calls = Executors.newSingleThreadExecutor(daemon("eoslab-txn-" + handle));
    this.stats =
        statsIntervalMs > 0 ? Executors.newSingleThreadScheduledExecutor(daemon("eoslab-stats")) : null;
    if (stats != null) {
      stats.scheduleAtFixedRate(this::emitStats, statsIntervalMs, statsIntervalMs, TimeUnit.MILLISECONDS);
    }
  }

  void produce(long token, String topic, int partition, byte[] key, byte[] value) {
    try {
      producer.send(
          new ProducerRecord<>(topic, partition, key, value),
          (metadata, error) -> {
            if (error == null) {
              Wire.ack(token, metadata.partition(), metadata.hasOffset() ? metadata.offset() : null);
            } else {
              Wire.delivery(token, partition, delivered(error));
            }
          });
    } catch (RuntimeException refused) {
      Wire.delivery(token, partition, delivered(refused));
    }
  }

  /**
   * {@code count} values of {@code size} bytes sent to one partition from here, as fast as the
   * client takes them, every acknowledgement waited for: the client's own rate, without the line
   * protocol ({@code make bench}'s comparison point for the driver).
   */
  ObjectNode burst(String topic, int partition, int count, int size) {
    byte[] value = new byte[size];
    Arrays.fill(value, (byte) 'x');
    AtomicLong failed = new AtomicLong();
    long start = System.nanoTime();
    for (int i = 0; i < count; i++) {
      producer.send(
          new ProducerRecord<>(topic, partition, null, value),
          (metadata, error) -> {
            if (error != null) {
              failed.incrementAndGet();
            }
          });
    }
    producer.flush();
    ObjectNode answer = Wire.object();
    answer.put("seconds", (System.nanoTime() - start) / 1e9);
    answer.put("failed", failed.get());
    return answer;
  }

  private ObjectNode delivered(Exception error) {
    ObjectNode failure =
        Failure.of(fatalCause(error), Failure.Context.DELIVERY, clientFatal(), null);
    maybeReportFatal(failure);
    return failure;
  }

  /** The client went fatal: said once as an error event (librdkafka's error_cb). */
  private void maybeReportFatal(ObjectNode failure) {
    if (Boolean.TRUE.equals(clientFatal()) && fatalReported.compareAndSet(false, true)) {
      ObjectNode event = Wire.event("error");
      event.put("handle", handle);
      ObjectNode fatal = failure.deepCopy();
      fatal.put("fatal", true);
      event.set("error", fatal);
      Wire.emit(event);
    }
  }

  /** Abandon everything outstanding (librdkafka's purge): a forced close fails every record
   * still in the client. The producer takes no more records after it. */
  void purge() {
    producer.close(Duration.ZERO);
  }

  void close(long timeoutMs) {
    producer.close(Duration.ofMillis(timeoutMs));
    if (stats != null) {
      stats.shutdownNow();
    }
    calls.shutdownNow();
  }

  /** A transactional call, answered within {@code timeoutMs} (see the class comment). */
  void call(long id, String op, long timeoutMs, JsonNode command, Driver driver) {
    Future<?> run = pending.get(op);
    if (run == null) {
      Callable<Object> body = body(op, command, driver);
      run = calls.submit(body);
      pending.put(op, run);
    }
    try {
      run.get(timeoutMs, TimeUnit.MILLISECONDS);
      pending.remove(op);
      Wire.reply(id, Wire.object());
    } catch (TimeoutException stillRunning) {
      ObjectNode failure = Wire.object();
      failure.put("code", Failure.TIMED_OUT);
      failure.put("reason", op + " did not complete within " + timeoutMs + " ms");
      failure.put("exception", "");
      failure.put("fatal", false);
      failure.put("retriable", true);
      failure.put("abortable", false);
      Wire.fail(id, failure);
    } catch (ExecutionException failed) {
      pending.remove(op);
      ObjectNode failure =
          Failure.of(
              fatalCause(failed.getCause()), Failure.Context.CALL, clientFatal(), clientAbortable());
      maybeReportFatal(failure);
      Wire.fail(id, failure);
    } catch (InterruptedException interrupted) {
      Thread.currentThread().interrupt();
    }
  }

  private Callable<Object> body(String op, JsonNode command, Driver driver) {
    switch (op) {
      case "init_transactions":
        return () -> {
          producer.initTransactions();
          return null;
        };
      case "begin_transaction":
        return () -> {
          producer.beginTransaction();
          return null;
        };
      case "commit_transaction":
        return () -> {
          producer.commitTransaction();
          return null;
        };
      case "abort_transaction":
        return () -> {
          producer.abortTransaction();
          return null;
        };
      case "send_offsets_to_transaction":
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (JsonNode position : command.get("offsets")) {
          offsets.put(
              new TopicPartition(position.get(0).asText(), position.get(1).asInt()),
              new OffsetAndMetadata(position.get(2).asLong()));
        }
        ConsumerGroupMetadata metadata = driver.groupMetadata(command.get("group_metadata").asLong());
        return () -> {
          producer.sendOffsetsToTransaction(offsets, metadata);
          return null;
        };
      default:
        throw new IllegalArgumentException("unknown transactional call " + op);
    }
  }

  // ------------------------------------------------------------------ what the client hides
  /** The transaction manager's fatal state (null when the producer has none: no idempotence). */
  private Boolean clientFatal() {
    return (Boolean) invoke(transactionManager, "hasFatalError");
  }

  /** Once the client is fatal, every later call fails with "in an error state": the error
   * that made it fatal (the transaction manager's last error) is what to name. */
  private Throwable fatalCause(Throwable error) {
    if (!Boolean.TRUE.equals(clientFatal())) {
      return error;
    }
    Object last = field(transactionManager, "lastError");
    return last instanceof Throwable ? (Throwable) last : error;
  }

  private Boolean clientAbortable() {
    return (Boolean) invoke(transactionManager, "hasAbortableError");
  }

  private void emitStats() {
    ObjectNode stats = Wire.object();
    Object idAndEpoch = field(transactionManager, "producerIdAndEpoch");
    Object id = field(idAndEpoch, "producerId");
    Object epoch = field(idAndEpoch, "epoch");
    stats.put("producer_id", id == null ? -1L : ((Number) id).longValue());
    stats.put("producer_epoch", epoch == null ? -1 : ((Number) epoch).intValue());
    for (Map.Entry<MetricName, ? extends Metric> metric : producer.metrics().entrySet()) {
      MetricName name = metric.getKey();
      if (name.group().equals("producer-metrics")
          && (name.name().equals("record-send-total")
              || name.name().equals("record-retry-total")
              || name.name().equals("record-error-total"))) {
        Object value = metric.getValue().metricValue();
        stats.put(name.name(), value instanceof Number ? ((Number) value).longValue() : 0L);
      }
    }
    ObjectNode event = Wire.event("stats");
    event.put("handle", handle);
    event.set("stats", stats);
    Wire.emit(event);
  }

  static Object field(Object owner, String name) {
    if (owner == null) {
      return null;
    }
    for (Class<?> type = owner.getClass(); type != null; type = type.getSuperclass()) {
      try {
        Field field = type.getDeclaredField(name);
        field.setAccessible(true);
        return field.get(owner);
      } catch (NoSuchFieldException e) {
        // look in the superclass
      } catch (IllegalAccessException e) {
        return null;
      }
    }
    return null;
  }

  private static Object invoke(Object owner, String name) {
    if (owner == null) {
      return null;
    }
    try {
      Method method = owner.getClass().getDeclaredMethod(name);
      method.setAccessible(true);
      return method.invoke(owner);
    } catch (ReflectiveOperationException e) {
      return null;
    }
  }

  static java.util.concurrent.ThreadFactory daemon(String name) {
    return runnable -> {
      Thread thread = new Thread(runnable, name);
      thread.setDaemon(true);
      return thread;
    };
  }
}
