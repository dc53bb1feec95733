package kafkapy.compat;

import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A tiny JSON writer: the scenarios print one JSON object per line on stdout and the Python
 * tests parse them. Why hand-written: kafka-clients brings no JSON library, and the values here
 * are only strings, numbers, booleans, lists and maps.
 */
final class Json {
  /** Events carry milliseconds since start ("t_ms"): a slow step shows up in a failure. */
  private static final long START_MS = System.currentTimeMillis();

  private Json() {}

  /** Start an event line: {"event": name, ...}. */
  static Map<String, Object> event(String name) {
    Map<String, Object> map = new LinkedHashMap<>();
    map.put("event", name);
    return map;
  }

  /** Print one event as a single JSON line (synchronised: consumer threads print too). */
  static synchronized void emit(Map<String, Object> event) {
    event.put("t_ms", System.currentTimeMillis() - START_MS);
    System.out.println(write(event));
    System.out.flush();
  }

  static String write(Object value) {
    StringBuilder out = new StringBuilder();
    append(out, value);
    return out.toString();
  }

  private static void append(StringBuilder out, Object value) {
    if (value == null) {
      out.append("null");
    } else if (value instanceof String s) {
      quote(out, s);
    } else if (value instanceof Number || value instanceof Boolean) {
      out.append(value);
    } else if (value instanceof Map<?, ?> map) {
      out.append('{');
      boolean first = true;
      for (Map.Entry<?, ?> entry : map.entrySet()) {
        if (!first) out.append(',');
        first = false;
        quote(out, String.valueOf(entry.getKey()));
        out.append(':');
        append(out, entry.getValue());
      }
      out.append('}');
    } else if (value instanceof Collection<?> items) {
      out.append('[');
      boolean first = true;
      for (Object item : items) {
        if (!first) out.append(',');
        first = false;
        append(out, item);
      }
      out.append(']');
    } else {
      quote(out, value.toString());
    }
  }

  private static void quote(StringBuilder out, String s) {
    out.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"' -> out.append("\\\"");
        case '\\' -> out.append("\\\\");
        case '\n' -> out.append("\\n");
        case '\r' -> out.append("\\r");
        case '\t' -> out.append("\\t");
        default -> {
          if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
          else out.append(c);
        }
      }
    }
    out.append('"');
  }
}
