package dev.towerlock.interop;

import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RedissonClient;

/**
 * The {@code sem_*} commands: Redisson's {@code RPermitExpirableSemaphore}, against
 * tower-lock's semaphore on the same names.
 */
final class Semaphores {
    private final RedissonClient redisson;

    Semaphores(RedissonClient redisson) {
        this.redisson = redisson;
    }

    /** Runs {@code sem_<command>} with the line's words; {@code null}: not one of ours. */
    String run(String command, String[] w) throws Exception {
        return switch (command) {
            // sem_set <name> <permits>: trySetPermits (only if the name is new)
            case "sem_set" -> String.valueOf(of(w[2]).trySetPermits(Integer.parseInt(w[3])));
            // sem_acquire <name> <permits> <wait ms> <lease ms>: tryAcquire; the ids or busy
            case "sem_acquire" -> acquire(w[2], Integer.parseInt(w[3]), Long.parseLong(w[4]),
                    Long.parseLong(w[5]));
            // sem_release <name> <id,id,…>: tryRelease of the ids (all or nothing): how many
            case "sem_release" -> String.valueOf(
                    of(w[2]).tryRelease(Arrays.asList(w[3].split(","))));
            // sem_available <name>: availablePermits (reclaims expired permits first)
            case "sem_available" -> String.valueOf(of(w[2]).availablePermits());
            // sem_acquired <name>: acquiredPermits
            case "sem_acquired" -> String.valueOf(of(w[2]).acquiredPermits());
            default -> null;
        };
    }

    private String acquire(String name, int permits, long waitMs, long leaseMs)
            throws InterruptedException {
        List<String> ids = of(name).tryAcquire(permits, waitMs, leaseMs, TimeUnit.MILLISECONDS);
        if (ids == null || ids.isEmpty()) {
            return "busy";
        }
        return "acquired ids=" + String.join(",", ids);
    }

    private RPermitExpirableSemaphore of(String name) {
        return redisson.getPermitExpirableSemaphore(name);
    }
}
