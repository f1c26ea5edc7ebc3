package eoslab.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;

/**
 * eoslab's driver for Kafka's Java client: the lab's workload roles (the Python session
 * processes) run their Kafka client through it. One driver process per session, a child of the
 * session's process and in its process group (a kill -9 or a SIGSTOP of the session reaches
 * both); it reads one command a line on stdin (a {@code produce} line followed by its records'
 * bytes) and writes replies and events on stdout, as {@code
 * src/eoslab/workload/drivers/contract.py} specifies. It holds no application logic: what
 * to send, when to commit, what a record's effect is, are the host's.
 *
 * <p>stdin closing means the host is gone: the driver halts at once, as a crash would, without
 * flushing or closing anything.
 */
public final class Driver {
  private static final int SNAPSHOTS_KEPT = 64;

  private final DataInputStream in = new DataInputStream(new BufferedInputStream(System.in, 1 << 16));
  private final ByteArrayOutputStream line = new ByteArrayOutputStream(256);
  private final Map<String, ProducerHandle> producers = new HashMap<>();
  private final Map<String, ConsumerHandle> consumers = new HashMap<>();
  private final Map<Long, ConsumerGroupMetadata> snapshots = new LinkedHashMap<>();
  private long nextSnapshot = 1;

  public static void main(String[] args) {
    System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
    System.setProperty("org.slf4j.simpleLogger.showDateTime", "true");
    Wire.start();
    new Driver().serve(false);
    Runtime.getRuntime().halt(0);
  }

  /** Commands until stdin closes, or (inside a rebalance callback) until {@code resume}. */
  void serve(boolean untilResume) {
    while (true) {
      JsonNode command;
      byte[] records = null;
      try {
        if (!readLine()) {
          Runtime.getRuntime().halt(0);
          return;
        }
        try {
          command = Wire.JSON.readTree(line.toByteArray());
        } catch (IOException e) {
          System.err.println("eoslab driver: not a JSON command: " + line);
          continue;
        }
        if (command.has("bytes")) {
          records = new byte[command.get("bytes").asInt()];
          in.readFully(records);
        }
      } catch (IOException e) { // stdin closed: the host is gone
        Runtime.getRuntime().halt(0);
        return;
      }
      String op = command.path("op").asText();
      if (records != null) {
        try {
          produce(command, ByteBuffer.wrap(records));
        } catch (BufferUnderflowException | NegativeArraySizeException malformed) {
          System.err.println("eoslab driver: a produce payload that is not records: " + malformed);
          Runtime.getRuntime().halt(1); // the host sees the driver gone, as after a crash
        }
        continue;
      }
      if (op.equals("resume")) {
        if (untilResume) {
          return;
        }
        continue;
      }
      execute(op, command);
    }
  }

  /** The next line of stdin into {@code line} (without its newline); false at its end. */
  private boolean readLine() throws IOException {
    line.reset();
    int next;
    while ((next = in.read()) != '\n') {
      if (next < 0) {
        return false;
      }
      line.write(next);
    }
    return true;
  }

  /** A {@code produce} command's records, each handed to the client. */
  private void produce(JsonNode command, ByteBuffer records) {
    String handle = command.path("handle").asText();
    ProducerHandle producer = producers.get(handle);
    String topic = command.path("topic").asText();
    RuntimeException noProducer = new IllegalStateException("no producer " + handle);
    while (records.hasRemaining()) {
      long token = records.getLong();
      int partition = records.getInt();
      int keyLength = records.getInt();
      int valueLength = records.getInt();
      byte[] key = bytes(records, keyLength);
      byte[] value = bytes(records, valueLength);
      if (producer == null) {
        Wire.delivery(token, partition, Failure.of(noProducer, Failure.Context.CALL, null, false));
      } else {
        producer.produce(token, topic, partition, key, value);
      }
    }
  }

  private static byte[] bytes(ByteBuffer records, int length) {
    if (length < 0) {
      return null;
    }
    byte[] data = new byte[length];
    records.get(data);
    return data;
  }

  void serveUntilResume() {
    serve(true);
  }

  private void execute(String op, JsonNode command) {
    long id = command.path("id").asLong(-1);
    String handle = command.path("handle").asText();
    long timeoutMs = command.path("timeout_ms").asLong(30_000);
    try {
      switch (op) {
        case "hello":
          ObjectNode hello = Wire.object();
          hello.put("client", "java");
          hello.put("version", clientVersion());
          Wire.reply(id, hello);
          break;
        case "producer":
          producers.put(
              handle,
              new ProducerHandle(handle, properties(command.get("config")), command.path("stats_ms").asLong(0)));
          Wire.reply(id, Wire.object());
          break;
        case "consumer":
          Properties config = properties(command.get("config"));
          if (Boolean.parseBoolean(config.getProperty(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false"))) {
            config.put(ConsumerConfig.INTERCEPTOR_CLASSES_CONFIG, CommitReporter.class.getName());
            config.put(ConsumerConfig.CLIENT_ID_CONFIG, CommitReporter.CLIENT_ID_PREFIX + handle);
          }
          consumers.put(handle, new ConsumerHandle(handle, config, command.path("eof").asBoolean(), this));
          Wire.reply(id, Wire.object());
          break;
        case "purge":
          producers.get(handle).purge();
          Wire.reply(id, Wire.object());
          break;
        case "produce_burst":
          Wire.reply(
              id,
              producers
                  .get(handle)
                  .burst(
                      command.get("topic").asText(),
                      command.get("partition").asInt(),
                      command.get("count").asInt(),
                      command.get("value_bytes").asInt()));
          break;
        case "close_producer":
          producers.get(handle).close(timeoutMs);
          producers.remove(handle);
          Wire.reply(id, Wire.object());
          break;
        case "init_transactions":
        case "begin_transaction":
        case "commit_transaction":
        case "abort_transaction":
        case "send_offsets_to_transaction":
          producers.get(handle).call(id, op, timeoutMs, command, this);
          break;
        case "subscribe":
          List<String> topics = new ArrayList<>();
          command.get("topics").forEach(topic -> topics.add(topic.asText()));
          consumers.get(handle).subscribe(topics);
          Wire.reply(id, Wire.object());
          break;
        case "assign":
          consumers.get(handle).assign(command.get("partitions"));
          Wire.reply(id, Wire.object());
          break;
        case "consume":
          Wire.reply(id, consumers.get(handle).consume(command.path("max").asInt(1), timeoutMs));
          break;
        case "commit":
          Wire.reply(id, consumers.get(handle).commit(command.get("offsets")));
          break;
        case "committed":
          Wire.reply(id, consumers.get(handle).committed(command.get("partitions"), timeoutMs));
          break;
        case "seek":
          consumers.get(handle).seek(command.get("position"));
          Wire.reply(id, Wire.object());
          break;
        case "pause":
        case "resume_partitions":
          consumers.get(handle).pause(command.get("partitions"), op.equals("pause"));
          Wire.reply(id, Wire.object());
          break;
        case "watermarks":
          Wire.reply(id, consumers.get(handle).watermarks(command.get("position"), timeoutMs));
          break;
        case "group_metadata":
          Wire.reply(id, snapshot(consumers.get(handle).groupMetadata()));
          break;
        case "close_consumer":
          consumers.get(handle).close(timeoutMs); // its revoke callback may still ask for it
          consumers.remove(handle);
          Wire.reply(id, Wire.object());
          break;
        case "exit":
          Runtime.getRuntime().halt(0);
          break;
        default:
          throw new IllegalArgumentException("unknown command " + op);
      }
    } catch (RuntimeException failed) {
      if (id >= 0) {
        Wire.fail(id, Failure.of(failed, Failure.Context.CALL, null, false));
      } else {
        System.err.println("eoslab driver: " + op + ": " + failed);
      }
    }
  }

  /** The consumer's group metadata now, kept for a transactional producer's offsets. */
  private ObjectNode snapshot(ConsumerGroupMetadata metadata) {
    long id = nextSnapshot++;
    snapshots.put(id, metadata);
    Iterator<Long> oldest = snapshots.keySet().iterator();
    while (snapshots.size() > SNAPSHOTS_KEPT) {
      oldest.next();
      oldest.remove();
    }
    ObjectNode answer = Wire.object();
    answer.put("id", id);
    answer.put("generation", metadata.generationId());
    answer.put("member_id", metadata.memberId());
    return answer;
  }

  ConsumerGroupMetadata groupMetadata(long id) {
    ConsumerGroupMetadata metadata = snapshots.get(id);
    if (metadata == null) {
      throw new IllegalArgumentException("no consumer group metadata " + id);
    }
    return metadata;
  }

  /** The Kafka client release on the class path, as its jar says (kafka-version.properties). */
  private static String clientVersion() {
    Properties version = new Properties();
    try (InputStream file = ConsumerConfig.class.getResourceAsStream("/kafka/kafka-version.properties")) {
      if (file != null) {
        version.load(file);
      }
    } catch (IOException e) {
      return "unknown";
    }
    return version.getProperty("version", "unknown");
  }

  private static Properties properties(JsonNode config) {
    Properties properties = new Properties();
    config.fields().forEachRemaining(entry -> properties.put(entry.getKey(), entry.getValue().asText()));
    return properties;
  }
}
