package dev.towerlock.interop;

import java.time.Instant;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import org.redisson.api.RAtomicLong;
import org.redisson.api.RFencedLock;
import org.redisson.api.RList;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;

/**
 * The commands of the line protocol. Each runs on its holder's thread (or, for commands
 * that name no holder, on a shared pool) and answers with its request's tag.
 */
final class Commands {
    private final RedissonClient redisson;
    private final Replies replies;
    /** One thread per holder: Redisson's owner id is {@code <client id>:<thread id>}. */
    private final Map<String, ExecutorService> holders = new ConcurrentHashMap<>();
    private final ExecutorService shared = Executors.newCachedThreadPool(daemon("shared"));
    private final Semaphores semaphores;

    Commands(RedissonClient redisson, Replies replies) {
        this.redisson = redisson;
        this.replies = replies;
        this.semaphores = new Semaphores(redisson);
    }

    /** Parses {@code <tag> <command> <args…>} and runs it where it belongs. */
    void submit(String line) {
        String[] words = line.split("\\s+");
        String tag = words[0];
        if (words.length < 2) {
            replies.line(tag + " err Usage missing command");
            return;
        }
        String command = words[1];
        boolean perHolder = switch (command) {
            case "lock", "unlock", "hold_count", "held", "owner", "witness" -> true;
            default -> false;
        };
        ExecutorService executor = shared;
        if (perHolder) {
            if (words.length < 3) {
                replies.line(tag + " err Usage " + command + " needs a holder");
                return;
            }
            executor = holders.computeIfAbsent(words[2],
                    holder -> Executors.newSingleThreadExecutor(daemon("holder-" + holder)));
        }
        executor.execute(() -> {
            try {
                replies.ok(tag, run(command, words));
            } catch (Throwable error) {
                replies.err(tag, error);
            }
        });
    }

    private String run(String command, String[] w) throws Exception {
        if (command.startsWith("sem_")) {
            String answer = semaphores.run(command, w);
            if (answer != null) {
                return answer;
            }
        }
        return switch (command) {
            // lock <holder> <kind> <name> <wait ms | -1: forever> <lease ms | -1: watchdog>
            case "lock" -> lock(w[3], w[4], Long.parseLong(w[5]), Long.parseLong(w[6]));
            // unlock <holder> <kind> <name>
            case "unlock" -> {
                long start = epochMicros();
                long began = System.nanoTime();
                lockOf(w[3], w[4]).unlock();
                yield "released took_us=" + micros(began) + " start_us=" + start
                        + " at_us=" + epochMicros();
            }
            // hold_count <holder> <kind> <name>
            case "hold_count" -> String.valueOf(lockOf(w[3], w[4]).getHoldCount());
            // held <holder> <kind> <name>
            case "held" -> String.valueOf(lockOf(w[3], w[4]).isHeldByCurrentThread());
            // owner <holder>: the owner id this holder's holds are stored under
            case "owner" -> redisson.getId() + ":" + Thread.currentThread().getId();
            // witness <holder> <kind> <name> <rounds> <hold µs> <counter key> <log key> <mark>
            case "witness" -> witness(w[3], w[4], Integer.parseInt(w[5]), Long.parseLong(w[6]),
                    w[7], w[8], w[9]);
            // contend <kind> <name> <threads> <hold µs> <duration ms> <counter key>
            case "contend" -> contend(w[2], w[3], Integer.parseInt(w[4]), Long.parseLong(w[5]),
                    Long.parseLong(w[6]), w[7]);
            // is_locked <kind> <name>
            case "is_locked" -> String.valueOf(lockOf(w[2], w[3]).isLocked());
            // force_unlock <kind> <name>
            case "force_unlock" -> String.valueOf(lockOf(w[2], w[3]).forceUnlock());
            // ttl <kind> <name>: remainTimeToLive in ms (-2: no lock, -1: no expiry)
            case "ttl" -> String.valueOf(lockOf(w[2], w[3]).remainTimeToLive());
            // token <name>: the fenced lock's current token
            case "token" -> String.valueOf(redisson.getFencedLock(w[2]).getToken());
            default -> throw new IllegalArgumentException("unknown command " + command);
        };
    }

    private String lock(String kind, String name, long waitMs, long leaseMs) throws Exception {
        RLock lock = lockOf(kind, name);
        long began = System.nanoTime();
        Long token = null;
        boolean acquired;
        if (lock instanceof RFencedLock fenced) {
            token = waitMs < 0
                    ? fenced.lockAndGetToken(leaseMs, TimeUnit.MILLISECONDS)
                    : fenced.tryLockAndGetToken(waitMs, leaseMs, TimeUnit.MILLISECONDS);
            acquired = token != null;
        } else if (waitMs < 0) {
            lock.lock(leaseMs, TimeUnit.MILLISECONDS);
            acquired = true;
        } else {
            acquired = lock.tryLock(waitMs, leaseMs, TimeUnit.MILLISECONDS);
        }
        String fields = (acquired ? "acquired" : "busy") + " took_us=" + micros(began)
                + " at_us=" + epochMicros();
        return token == null ? fields : fields + " token=" + token;
    }

    /**
     * Takes the lock {@code rounds} times; inside each hold, INCRs the shared counter (any
     * value but 1 is a second holder at once: a violation), appends {@code mark} to the log
     * list, holds for {@code holdMicros}, DECRs the counter and unlocks.
     */
    private String witness(String kind, String name, int rounds, long holdMicros,
                           String counterKey, String logKey, String mark) {
        RLock lock = lockOf(kind, name);
        RAtomicLong counter = redisson.getAtomicLong(counterKey);
        RList<String> log = redisson.getList(logKey, StringCodec.INSTANCE);
        int violations = 0;
        for (int i = 0; i < rounds; i++) {
            lock.lock();
            try {
                if (counter.incrementAndGet() != 1) {
                    violations++;
                }
                log.add(mark);
                LockSupport.parkNanos(holdMicros * 1000);
                counter.decrementAndGet();
            } finally {
                lock.unlock();
            }
        }
        return "rounds=" + rounds + " violations=" + violations;
    }

    /**
     * {@code threads} threads take the lock in turn for {@code durationMs}, each holding it
     * {@code holdMicros} and asking again at once; inside each hold the shared counter is
     * INCRed (any value but 1 is a second holder: a violation) and DECRed. Answers each
     * thread's number of holds.
     */
    private String contend(String kind, String name, int threads, long holdMicros,
                           long durationMs, String counterKey) throws Exception {
        RAtomicLong counter = redisson.getAtomicLong(counterKey);
        long deadline = System.nanoTime() + durationMs * 1_000_000L;
        long[] holds = new long[threads];
        int[] violations = new int[1];
        Thread[] workers = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            int at = t;
            workers[t] = new Thread(() -> {
                RLock lock = lockOf(kind, name);
                while (System.nanoTime() < deadline) {
                    lock.lock();
                    try {
                        if (counter.incrementAndGet() != 1) {
                            synchronized (violations) {
                                violations[0]++;
                            }
                        }
                        LockSupport.parkNanos(holdMicros * 1000);
                        counter.decrementAndGet();
                        holds[at]++;
                    } finally {
                        lock.unlock();
                    }
                }
            }, "contend-" + t);
            workers[t].start();
        }
        for (Thread worker : workers) {
            worker.join();
        }
        StringBuilder counts = new StringBuilder();
        for (long h : holds) {
            if (counts.length() > 0) {
                counts.append(',');
            }
            counts.append(h);
        }
        return "holds=" + counts + " violations=" + violations[0];
    }

    private RLock lockOf(String kind, String name) {
        return switch (kind) {
            case "lock" -> redisson.getLock(name);
            case "fair" -> redisson.getFairLock(name);
            case "read" -> redisson.getReadWriteLock(name).readLock();
            case "write" -> redisson.getReadWriteLock(name).writeLock();
            case "fenced" -> redisson.getFencedLock(name);
            default -> throw new IllegalArgumentException(
                    "unknown lock kind " + kind + " (lock, fair, read, write, fenced)");
        };
    }

    void shutdown() {
        holders.values().forEach(ExecutorService::shutdownNow);
        shared.shutdownNow();
    }

    private static long micros(long startedNanos) {
        return (System.nanoTime() - startedNanos) / 1000;
    }

    private static long epochMicros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1000;
    }

    private static java.util.concurrent.ThreadFactory daemon(String name) {
        return runnable -> {
            Thread thread = new Thread(runnable, name);
            thread.setDaemon(true);
            return thread;
        };
    }
}
