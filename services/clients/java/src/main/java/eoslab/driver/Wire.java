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
 * block on the pipe, and flushed whenever nothing else is waiting.
 *
 * <p>Keys and values cross the protocol as latin-1 strings: one char per byte, so any bytes
 * survive the JSON text unchanged.
 */
final class Wire {
  static final ObjectMapper JSON = new ObjectMapper();
  private static final LinkedBlockingQueue<String> OUT = new LinkedBlockingQueue<>();

  private Wire() {}

  static void start() {
    Thread writer = new Thread(Wire::drain, "eoslab-wire");
    writer.setDaemon(true);
    writer.start();
  }

  private static void drain() {
    BufferedWriter out =
        new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16);
    List<String> batch = new ArrayList<>();
    try {
      while (true) {
        batch.add(OUT.take());
        OUT.drainTo(batch);
        for (String line : batch) {
          out.write(line);
          out.write('\n');
        }
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

  static void emit(ObjectNode line) {
    OUT.add(line.toString());
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

  static byte[] bytes(JsonNode text) {
    return text == null || text.isNull() ? null : text.asText().getBytes(StandardCharsets.ISO_8859_1);
  }

  static String text(byte[] bytes) {
    return bytes == null ? null : new String(bytes, StandardCharsets.ISO_8859_1);
  }

  static ArrayNode array() {
    return JSON.createArrayNode();
  }
}
