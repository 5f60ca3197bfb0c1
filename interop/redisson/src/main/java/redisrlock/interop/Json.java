package redisrlock.interop;

import java.util.Map;

/**
 * The driver's replies as JSON: flat objects of strings, whole numbers, booleans and null.
 * Written by hand so the driver needs nothing beyond Redisson.
 */
final class Json {
    private Json() {
    }

    static String write(Map<String, Object> fields) {
        StringBuilder json = new StringBuilder("{");
        for (Map.Entry<String, Object> field : fields.entrySet()) {
            if (json.length() > 1) {
                json.append(',');
            }
            string(json, field.getKey());
            json.append(':');
            value(json, field.getValue());
        }
        return json.append('}').toString();
    }

    private static void value(StringBuilder json, Object value) {
        if (value == null) {
            json.append("null");
        } else if (value instanceof Boolean || value instanceof Long || value instanceof Integer) {
            json.append(value);
        } else {
            string(json, value.toString());
        }
    }

    private static void string(StringBuilder json, String s) {
        json.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> json.append("\\\"");
                case '\\' -> json.append("\\\\");
                case '\n' -> json.append("\\n");
                case '\r' -> json.append("\\r");
                case '\t' -> json.append("\\t");
                default -> {
                    if (c < 0x20) {
                        json.append(String.format("\\u%04x", (int) c));
                    } else {
                        json.append(c);
                    }
                }
            }
        }
        json.append('"');
    }
}
