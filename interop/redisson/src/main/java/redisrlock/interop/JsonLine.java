package redisrlock.interop;

import java.util.Locale;

/**
 * One flat JSON object built field by field, with numbers to a given precision: the
 * benchmark's lines, which the driver's {@link Json} (whole numbers only) cannot write.
 */
final class JsonLine {
    private final StringBuilder json = new StringBuilder("{");

    JsonLine str(String name, String value) {
        key(name);
        quoted(value);
        return this;
    }

    /** A number with {@code decimals} digits after the point; NaN and infinities as null. */
    JsonLine num(String name, double value, int decimals) {
        key(name);
        if (Double.isFinite(value)) {
            json.append(String.format(Locale.ROOT, "%." + decimals + "f", value));
        } else {
            json.append("null");
        }
        return this;
    }

    JsonLine raw(String name, long value) {
        key(name);
        json.append(value);
        return this;
    }

    JsonLine bool(String name, boolean value) {
        key(name);
        json.append(value);
        return this;
    }

    @Override
    public String toString() {
        return json + "}";
    }

    private void key(String name) {
        if (json.length() > 1) {
            json.append(',');
        }
        quoted(name);
        json.append(':');
    }

    private void quoted(String s) {
        json.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                json.append('\\').append(c);
            } else if (c < 0x20) {
                json.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
            } else {
                json.append(c);
            }
        }
        json.append('"');
    }
}
