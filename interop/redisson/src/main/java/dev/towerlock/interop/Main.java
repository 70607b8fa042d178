package dev.towerlock.interop;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * A Redisson client driven over stdin/stdout, one command per line (see README.md).
 *
 * <pre>
 * java -jar redisson-interop.jar [--watchdog-ms N] single   redis://127.0.0.1:6379
 * java -jar redisson-interop.jar [--watchdog-ms N] cluster  redis://127.0.0.1:7000 [more nodes…]
 * java -jar redisson-interop.jar [--watchdog-ms N] sentinel mymaster redis://127.0.0.1:26379 [more…]
 * </pre>
 *
 * It prints {@code ready <redisson version> <client id>} once connected, then answers each
 * request line {@code <tag> <command> <args…>} with {@code <tag> ok <fields…>} or
 * {@code <tag> err <exception> <message>}. Commands of one holder run in order on that
 * holder's own thread (Redisson ties lock ownership to a thread); commands of different
 * holders run at once. End of input, or {@code quit}, shuts the client down.
 */
public final class Main {
    public static void main(String[] args) throws IOException {
        Config config = config(args);
        RedissonClient redisson = Redisson.create(config);
        Replies replies = new Replies(System.out);
        Commands commands = new Commands(redisson, replies);
        replies.line("ready " + redissonVersion() + " " + redisson.getId());

        BufferedReader input =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = input.readLine()) != null) {
            line = line.strip();
            if (line.isEmpty()) {
                continue;
            }
            if (line.equals("quit")) {
                break;
            }
            commands.submit(line);
        }
        commands.shutdown();
        redisson.shutdown();
        System.exit(0);
    }

    private static Config config(String[] args) {
        List<String> rest = new ArrayList<>(List.of(args));
        Config config = new Config();
        if (rest.size() >= 2 && rest.get(0).equals("--watchdog-ms")) {
            config.setLockWatchdogTimeout(Long.parseLong(rest.get(1)));
            rest = rest.subList(2, rest.size());
        }
        if (rest.size() < 2) {
            usage();
        }
        String mode = rest.get(0);
        List<String> addresses = rest.subList(1, rest.size());
        switch (mode) {
            case "single" -> config.useSingleServer().setAddress(addresses.get(0));
            case "cluster" -> config.useClusterServers()
                    .addNodeAddress(addresses.toArray(String[]::new));
            case "sentinel" -> {
                if (addresses.size() < 2) {
                    usage();
                }
                config.useSentinelServers()
                        .setMasterName(addresses.get(0))
                        .setCheckSentinelsList(false)
                        .addSentinelAddress(addresses.subList(1, addresses.size())
                                .toArray(String[]::new));
            }
            default -> usage();
        }
        return config;
    }

    private static void usage() {
        System.err.println("usage: redisson-interop [--watchdog-ms N] "
                + "(single ADDRESS | cluster ADDRESS… | sentinel MASTER ADDRESS…)");
        System.exit(2);
    }

    /** The version of the Redisson jar on the class path, from its Maven metadata. */
    static String redissonVersion() {
        String path = "/META-INF/maven/org.redisson/redisson/pom.properties";
        try (InputStream in = Redisson.class.getResourceAsStream(path)) {
            if (in == null) {
                return "unknown";
            }
            Properties properties = new Properties();
            properties.load(in);
            return properties.getProperty("version", "unknown");
        } catch (IOException e) {
            return "unknown";
        }
    }
}
