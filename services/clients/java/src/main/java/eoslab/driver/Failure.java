package eoslab.driver;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.protocol.Errors;

/**
 * A Java client exception as the protocol's error object: {@code code} (Kafka's error code, or
 * librdkafka's number for a condition local to the client, so that every driver's errors have
 * one vocabulary: the host names them with librdkafka's names), {@code reason}, {@code
 * exception} (the Java class), and how the application must treat it: {@code fatal} (the client
 * is unusable), {@code retriable} (the same call may be tried again), {@code abortable} (the
 * transaction must be aborted).
 *
 * <p>Local conditions, in librdkafka's numbers: a record that expired in the client (a {@link
 * TimeoutException} in a delivery callback: delivery.timeout.ms) is {@code _MSG_TIMED_OUT}; a
 * blocking call that ran out of time is {@code _TIMED_OUT} (retriable, as librdkafka's); a record
 * abandoned by a forced close (the host's purge) is {@code _PURGE_INFLIGHT} (the Java client
 * cannot tell a record never sent from one in flight); a fenced producer is {@code _FENCED}
 * (librdkafka's name for it; the Java client says ProducerFencedException); any other failure
 * without a Kafka error is {@code _STATE} ({@code _FATAL} when the client is fatal).
 */
final class Failure {
  static final int MSG_TIMED_OUT = -192;
  static final int TIMED_OUT = -185;
  static final int PURGE_INFLIGHT = -151;
  static final int FENCED = -144;
  static final int FATAL = -150;
  static final int STATE = -172;

  /** Exceptions after which the Java client is unusable (matched by simple name, so that one
   * source compiles against every client release, whatever classes it has). */
  private static final Set<String> FATAL_CLASSES =
      Set.of(
          "ProducerFencedException",
          "FencedInstanceIdException",
          "UnsupportedVersionException",
          "TransactionalIdAuthorizationException",
          "ClusterAuthorizationException",
          "TopicAuthorizationException",
          "GroupAuthorizationException",
          "UnsupportedForMessageFormatException");

  /** Where the failure happened: it decides how a timeout and a forced close are named. */
  enum Context {
    DELIVERY,
    CALL
  }

  private Failure() {}

  static ObjectNode of(Throwable raised, Context context, Boolean clientFatal, Boolean abortable) {
    Throwable error = unwrap(raised);
    ApiException api = apiCause(error);
    boolean fatal = Boolean.TRUE.equals(clientFatal) || fatalClass(error);
    int code;
    if (named(error, "ProducerFencedException")) {
      code = FENCED;
    } else if (api instanceof TimeoutException && api == error) {
      code = context == Context.DELIVERY ? MSG_TIMED_OUT : TIMED_OUT;
    } else if (api != null) {
      code = Errors.forException(api).code();
    } else if (context == Context.DELIVERY && String.valueOf(error.getMessage()).contains("closed forcefully")) {
      code = PURGE_INFLIGHT;
    } else {
      code = fatal ? FATAL : STATE;
    }
    boolean retriable = !fatal && (error instanceof RetriableException || code == TIMED_OUT);
    ObjectNode node = Wire.object();
    node.put("code", code);
    node.put("reason", error.getClass().getSimpleName() + ": " + error.getMessage());
    node.put("exception", error.getClass().getName());
    node.put("fatal", fatal);
    node.put("retriable", retriable);
    node.put("abortable", abortable != null ? abortable && !fatal : !fatal && !retriable);
    return node;
  }

  private static Throwable unwrap(Throwable raised) {
    Throwable error = raised;
    while (error instanceof ExecutionException && error.getCause() != null) {
      error = error.getCause();
    }
    return error;
  }

  private static ApiException apiCause(Throwable error) {
    for (Throwable t = error; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof ApiException) {
        return (ApiException) t;
      }
    }
    return null;
  }

  private static boolean fatalClass(Throwable error) {
    for (Throwable t = error; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (FATAL_CLASSES.contains(t.getClass().getSimpleName())) {
        return true;
      }
    }
    return false;
  }

  private static boolean named(Throwable error, String simpleName) {
    for (Throwable t = error; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t.getClass().getSimpleName().equals(simpleName)) {
        return true;
      }
    }
    return false;
  }
}
