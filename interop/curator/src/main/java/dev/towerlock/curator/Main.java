package dev.towerlock.curator;

import java.io.BufferedReader;
import java.io.FileWriter;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.retry.ExponentialBackoffRetry;

/** Curator's locks, driven over stdin/stdout (see README.md). */
public final class Main {
    private static final PrintStream OUT =
            new PrintStream(System.out, true, StandardCharsets.UTF_8);

    /** One id's thread and what it holds. */
    private static final class Slot {
        final ExecutorService thread = Executors.newSingleThreadExecutor();
        InterProcessLock held;
    }

    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(args[0])
                .sessionTimeoutMs(args.length > 1 ? Integer.parseInt(args[1]) : 10_000)
                .connectionTimeoutMs(10_000)
                .retryPolicy(new ExponentialBackoffRetry(50, 10))
                .build();
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            throw new IllegalStateException("no ZooKeeper at " + args[0]);
        }
        OUT.println("ready");
        Map<String, Slot> slots = new ConcurrentHashMap<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split(" ");
            if (words.length < 2) {
                continue;
            }
            String id = words[0];
            Slot slot = slots.computeIfAbsent(id, k -> new Slot());
            slot.thread.submit(() -> {
                try {
                    OUT.println(id + " " + run(client, slot, words));
                } catch (Exception e) {
                    OUT.println(id + " error " + e.toString().replace('\n', ' '));
                }
            });
        }
        System.exit(0);
    }

    private static String run(CuratorFramework client, Slot slot, String[] words) throws Exception {
        switch (words[1]) {
            case "mutex":
            case "read":
            case "write": {
                InterProcessLock lock = lock(client, words[1], words[2]);
                if (!lock.acquire(Long.parseLong(words[3]), TimeUnit.MILLISECONDS)) {
                    return "timeout";
                }
                slot.held = lock;
                return "acquired " + micros();
            }
            case "release": {
                long at = micros();
                slot.held.release();
                slot.held = null;
                return "released " + at;
            }
            case "witness": {
                InterProcessMutex lock = new InterProcessMutex(client, words[2]);
                int rounds = Integer.parseInt(words[3]);
                long hold = Long.parseLong(words[4]);
                try (FileWriter file = new FileWriter(words[5], true)) {
                    for (int i = 0; i < rounds; i++) {
                        lock.acquire();
                        try {
                            file.write('+');
                            file.flush();
                            Thread.sleep(hold);
                            file.write('-');
                            file.flush();
                        } finally {
                            lock.release();
                        }
                    }
                }
                return "witnessed";
            }
            default:
                return "error unknown command " + words[1];
        }
    }

    private static InterProcessLock lock(CuratorFramework client, String kind, String path) {
        switch (kind) {
            case "read":
                return new InterProcessReadWriteLock(client, path).readLock();
            case "write":
                return new InterProcessReadWriteLock(client, path).writeLock();
            default:
                return new InterProcessMutex(client, path);
        }
    }

    private static long micros() {
        return ChronoUnit.MICROS.between(Instant.EPOCH, Instant.now());
    }
}
