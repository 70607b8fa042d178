package dev.towerlock.interop;

import java.io.PrintStream;

/** Answers on stdout, one whole line at a time whatever thread writes it. */
final class Replies {
    private final PrintStream out;

    Replies(PrintStream out) {
        this.out = out;
    }

    synchronized void line(String line) {
        out.println(line);
        out.flush();
    }

    void ok(String tag, String fields) {
        line(tag + " ok " + fields);
    }

    void err(String tag, Throwable error) {
        Throwable cause = error;
        while (cause.getCause() != null && cause != cause.getCause()) {
            cause = cause.getCause();
        }
        String message = String.valueOf(cause.getMessage()).replace('\n', ' ').replace('\r', ' ');
        line(tag + " err " + cause.getClass().getSimpleName() + " " + message);
    }
}
