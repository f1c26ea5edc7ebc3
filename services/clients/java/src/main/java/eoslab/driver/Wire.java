package eoslab.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;

/**
 * The driver's half of the line protocol's output: one JSON object a line on stdout (replies and
 * events), written by one thread so that the client's I/O threads (delivery callbacks) never
 * block on the pipe, and flushed whenever nothing else is waiting. Acknowledgements waiting one
 * after another go out as one {@code acks} line, in their order among the other lines.
 *
 * <p>Keys and values read by a consumer cross the protocol as latin-1 strings: one char per
 * byte, so any bytes survive the JSON text unchanged.
 */
final class Wire {
  static final ObjectMapper JSON = new ObjectMapper();
  private static final LinkedBlockingQueue<Object> OUT = new LinkedBlockingQueue<>();

  /** A record acknowledged: one entry of an {@code acks} line. */
  private record Ack(long token, int partition, Long offset) {}

  private Wire() {}

  static void start() {
    Thread writer = new Thread(Wire::drain, "eoslab-wire");
    writer.setDaemon(true);
    writer.start();
  }

  private static void drain() {
    BufferedWriter out =
        new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16);
    List<Object> batch = new ArrayList<>();
    StringBuilder acks = new StringBuilder(1 << 12);
    try {
      while (true) {
        batch.add(OUT.take());
        OUT.drainTo(batch);
        for (Object item : batch) {
          if (item instanceof Ack ack) {
            acks.append(acks.length() == 0 ? "{\"ev\":\"acks\",\"acks\":[" : ",");
            acks.append(ack.token()).append(',').append(ack.partition()).append(',').append(ack.offset());
            continue;
          }
          writeAcks(out, acks);
          out.write((String) item);
          out.write('\n');
        }
        writeAcks(out, acks);
        batch.clear();
        if (OUT.isEmpty()) {
          out.flush();
        }
      }
    } catch (IOException | InterruptedException e) {
      // the host is gone: nobody reads the answers any more
      Runtime.getRuntime().halt(0);
    }
  }

  private static void writeAcks(BufferedWriter out, StringBuilder acks) throws IOException {
    if (acks.length() > 0) {
      out.append(acks).append("]}\n");
      acks.setLength(0);
    }
  }

  static void emit(ObjectNode line) {
    OUT.add(line.toString());
  }

  /** A record acknowledged (offset null: without one). */
  static void ack(long token, int partition, Long offset) {
    OUT.add(new Ack(token, partition, offset));
  }

  /** A record that failed. */
  static void delivery(long token, int partition, ObjectNode error) {
    ObjectNode event = event("delivery");
    event.put("token", token);
    event.put("partition", partition);
    event.putNull("offset");
    event.set("error", error);
    emit(event);
  }

  static ObjectNode object() {
    return JSON.createObjectNode();
  }

  static ObjectNode event(String kind) {
    ObjectNode event = object();
    event.put("ev", kind);
    return event;
  }

  static void reply(long id, JsonNode result) {
    ObjectNode line = object();
    line.put("re", id);
    line.set("ok", result);
    emit(line);
  }

  static void fail(long id, ObjectNode error) {
    ObjectNode line = object();
    line.put("re", id);
    line.set("error", error);
    emit(line);
  }

  static String text(byte[] bytes) {
    return bytes == null ? null : new String(bytes, StandardCharsets.ISO_8859_1);
  }

  static ArrayNode array() {
    return JSON.createArrayNode();
  }
}
