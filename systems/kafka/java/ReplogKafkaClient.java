/*
 * Kafka's Java client (org.apache.kafka:kafka-clients) as a client of the harness:
 * one JVM per run serves every client process of the run over a line protocol
 * (systems/kafka/java_client.py is the other end).
 *
 * stdin, one JSON object a line:  {"id": 7, "client": 3, "op": "send", "args": {...}}
 * stdout, one JSON object a line: {"id": 7, "type": "ok", "value": ...}
 *                                 {"id": 7, "type": "fail" | "info", "error": "NAME: message", "absent": false}
 * Ops: open {bootstrap, timeout_ms, idempotent}, send {key, value, acks} -> offset,
 * poll {key, offset, max} -> [[offset, value], ...], end_offset {key} -> offset, close,
 * warm (a producer and a consumer made and the topic's metadata fetched, then closed with the client).
 * Ops "q_*" are the queue workload's (transactions, consumer groups): QueueProcess.java, its own header.
 * Each client id is one client process: its own KafkaProducer per acks and its own
 * KafkaConsumer (assign, no group), run on the client's own thread, in request order.
 * The JVM exits when stdin ends (the harness is gone: nothing is left behind).
 *
 * A send's error, by what it proves (the rules of the librdkafka client, client.py):
 *   where it happened                                   | example                                   | reply
 *   send() threw, or called back on the calling thread  | metadata wait timed out (max.block.ms),   | fail
 *     before returning (nothing reached the accumulator)| RecordTooLarge, partition not in metadata, |
 *                                                       | a producer in a fatal state               |
 *   called back by the I/O thread: UNKNOWN_TOPIC_OR_PARTITION (the broker: no such log)             | fail (absent)
 *   called back by the I/O thread: anything else        | NOT_LEADER_OR_FOLLOWER (a leader that      | info
 *                                                       | appended and stepped down answers it),     |
 *                                                       | NOT_ENOUGH_REPLICAS(_AFTER_APPEND), delivery|
 *                                                       | timeout, a lost connection                 |
 * Not idempotent: retries=0, one request in flight, so one send is one broker answer
 * (Java, unlike librdkafka, does not re-send NOT_LEADER_OR_FOLLOWER without counting a retry).
 * Idempotent: enable.idempotence (acks=all, the client's own retries with sequence numbers);
 * an error that leaves the producer unusable (out-of-order sequence, unknown producer id, fenced
 * epoch) retires it: the next send of that client gets a new producer.
 * Reads change nothing: every poll and end_offset error is `fail`; OFFSET_OUT_OF_RANGE names
 * itself (the workload's truncated-log signal); a key the metadata has no partition for, or
 * UNKNOWN_TOPIC_OR_PARTITION, is `absent`.
 */
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.UnknownProducerIdException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class ReplogKafkaClient {
    static final String TOPIC = "log";
    static final long POLL_WAIT_MS = 100;      // a poll with nothing fetched waits this long (Jepsen's 100 ms)
    static final int KEPT_RECORDS = 20_000;    // records kept for a key not being read
    static final ObjectMapper JSON = new ObjectMapper();
    static final Map<Long, Client> CLIENTS = new ConcurrentHashMap<>();
    static final Map<Long, QueueProcess> QUEUES = new ConcurrentHashMap<>();   // the queue workload's processes
    static PrintStream out;

    public static void main(String[] argv) throws Exception {
        out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);   // nothing but replies on stdout
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        reply(JSON.createObjectNode().put("id", 0).put("type", "ok").put("value", "ready"));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            JsonNode req;
            try {
                req = JSON.readTree(line);
            } catch (Exception e) {
                System.err.println("bad request line: " + line);
                continue;
            }
            long id = req.path("id").asLong(), cid = req.path("client").asLong();
            String op = req.path("op").asText();
            JsonNode args = req.path("args");
            try {
                if (op.equals("open")) {
                    Client c = new Client(cid, args.path("bootstrap").asText(), args.path("timeout_ms").asInt(5000),
                                          args.path("idempotent").asBoolean(false));
                    Client old = CLIENTS.put(cid, c);
                    if (old != null) old.close();
                    ok(id, JSON.nullNode());
                    continue;
                }
                if (op.startsWith("q_")) {   // the queue workload (QueueProcess)
                    if (op.equals("q_open")) {
                        QueueProcess old = QUEUES.put(cid, new QueueProcess(cid, args));
                        if (old != null) old.handle(-1, "q_close", args);
                        ok(id, JSON.nullNode());
                        continue;
                    }
                    QueueProcess q = QUEUES.get(cid);
                    if (q == null) {
                        fail(id, "fail", "NOT_OPEN: queue client " + cid + " is not open", false);
                        continue;
                    }
                    q.handle(id, op, args);
                    if (op.equals("q_close")) {
                        QUEUES.remove(cid);
                        q.thread.shutdown();
                    }
                    continue;
                }
                Client c = CLIENTS.get(cid);
                if (c == null) {
                    fail(id, "fail", "NOT_OPEN: client " + cid + " is not open", false);
                    continue;
                }
                switch (op) {
                    case "send": c.thread.execute(() -> c.send(id, args.path("key").asInt(), args.path("value").asText(),
                                                                args.path("acks").asText("all"))); break;
                    case "poll": c.thread.execute(() -> c.poll(id, args.path("key").asInt(), args.path("offset").asLong(),
                                                                args.path("max").asInt(1000))); break;
                    case "end_offset": c.thread.execute(() -> c.endOffset(id, args.path("key").asInt())); break;
                    case "warm": c.thread.execute(() -> c.warm(id)); break;
                    case "close":
                        CLIENTS.remove(cid);
                        c.thread.execute(() -> { c.close(); ok(id, JSON.nullNode()); });
                        c.thread.shutdown();
                        break;
                    default: fail(id, "fail", "UNKNOWN_OP: " + op, false);
                }
            } catch (Exception e) {   // e.g. a client's thread already shut down
                fail(id, "fail", name(e) + ": " + e.getMessage(), false);
            }
        }
        for (Client c : CLIENTS.values()) c.close();   // stdin ended: the harness is gone
        for (QueueProcess q : QUEUES.values()) q.close();
        System.exit(0);
    }

    // -- replies ---------------------------------------------------------------
    static void reply(ObjectNode node) {
        String text;
        try {
            text = JSON.writeValueAsString(node);
        } catch (Exception e) {
            text = "{\"id\":" + node.path("id").asLong() + ",\"type\":\"fail\",\"error\":\"ENCODE\"}";
        }
        synchronized (ReplogKafkaClient.class) {
            out.print(text);
            out.print('\n');
            out.flush();
        }
    }

    static void ok(long id, JsonNode value) {
        ObjectNode r = JSON.createObjectNode().put("id", id).put("type", "ok");
        r.set("value", value);
        reply(r);
    }

    static void fail(long id, String type, String error, boolean absent) {
        reply(JSON.createObjectNode().put("id", id).put("type", type).put("error", error).put("absent", absent));
    }

    /** Kafka's error name of an exception (Errors.forException), else its class. */
    static String name(Throwable e) {
        Errors err = Errors.forException(e);
        return err != Errors.UNKNOWN_SERVER_ERROR ? err.name() : e.getClass().getSimpleName();
    }

    static String text(Throwable e) {
        String m = e.getMessage();
        return name(e) + (m == null ? "" : ": " + m);
    }

    static boolean absent(Throwable e) {
        return e instanceof UnknownTopicOrPartitionException;
    }

    /** An idempotent producer's error after which that producer is unusable. */
    static boolean fatal(Throwable e) {
        return e instanceof OutOfOrderSequenceException || e instanceof UnknownProducerIdException
            || e instanceof ProducerFencedException || e instanceof InvalidProducerEpochException;
    }

    // -- one client process ------------------------------------------------------
    static final class Client {
        final long id;
        final String bootstrap;
        final int timeoutMs;
        final boolean idempotent;
        final ExecutorService thread;
        final Map<String, KafkaProducer<byte[], String>> producers = new HashMap<>();
        KafkaConsumer<byte[], String> consumer;
        // the consumer's reads (as client.py's _KeptReader): key -> offset its kept records go on from
        final Map<Integer, Long> next = new HashMap<>();
        final Map<Integer, ArrayDeque<long[]>> keptOffsets = new HashMap<>();
        final Map<Integer, ArrayDeque<String>> keptValues = new HashMap<>();
        final Map<Integer, RuntimeException> errors = new HashMap<>();
        final Set<TopicPartition> assigned = new HashSet<>();

        Client(long id, String bootstrap, int timeoutMs, boolean idempotent) {
            this.id = id;
            this.bootstrap = bootstrap;
            this.timeoutMs = timeoutMs;
            this.idempotent = idempotent;
            this.thread = Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, "client-" + id);
                t.setDaemon(true);
                return t;
            });
        }

        KafkaProducer<byte[], String> producer(String acks) {
            return producers.computeIfAbsent(acks, a -> {
                Properties p = new Properties();
                int request = Math.max(1000, timeoutMs - 500);
                p.put("bootstrap.servers", bootstrap);
                p.put("client.id", "replog-" + id + "-acks" + a);
                p.put("linger.ms", "0");
                p.put("request.timeout.ms", Integer.toString(request));
                p.put("delivery.timeout.ms", Integer.toString(Math.max(timeoutMs, request)));
                // send() waits up to max.block.ms for the partition's metadata before the delivery
                // timeout starts: kept short so that the two together stay within the harness's wait
                // for an answer (the request timeout + 2 s), as librdkafka's message.timeout.ms does
                p.put("max.block.ms", Integer.toString(Math.min(2000, timeoutMs)));
                p.put("metadata.max.age.ms", "3000");
                p.put("reconnect.backoff.max.ms", "500");
                p.put("socket.connection.setup.timeout.ms", Integer.toString(timeoutMs));
                p.put("socket.connection.setup.timeout.max.ms", Integer.toString(timeoutMs));
                if (idempotent) {
                    p.put("enable.idempotence", "true");
                    p.put("acks", "all");
                } else {
                    p.put("enable.idempotence", "false");
                    p.put("acks", a);
                    p.put("retries", "0");
                    p.put("max.in.flight.requests.per.connection", "1");
                }
                return new KafkaProducer<>(p, new ByteArraySerializer(), new StringSerializer());
            });
        }

        void retire(String acks) {
            KafkaProducer<byte[], String> p = producers.remove(acks);
            if (p != null) new Thread(() -> p.close(Duration.ZERO), "retire-" + id).start();
        }

        void send(long rid, int key, String value, String acks) {
            final Thread caller = Thread.currentThread();
            final boolean[] returned = {false};
            KafkaProducer<byte[], String> p;
            try {
                p = producer(acks);
            } catch (KafkaException e) {   // a bad configuration: nothing sent
                fail(rid, "fail", text(e), false);
                return;
            }
            try {
                p.send(new ProducerRecord<>(TOPIC, key, null, value), (meta, e) -> {
                    if (e == null) {
                        ok(rid, JSON.getNodeFactory().numberNode(meta.hasOffset() ? meta.offset() : -1));
                    } else if (Thread.currentThread() == caller && !returned[0]) {
                        fail(rid, "fail", text(e), false);   // refused before the accumulator: not sent
                    } else {
                        if (idempotent && fatal(e)) thread.execute(() -> retire(acks));
                        fail(rid, absent(e) ? "fail" : "info", text(e), absent(e));
                    }
                });
            } catch (Exception e) {   // thrown by send(): nothing reached the accumulator
                if (e instanceof KafkaException && !(e instanceof org.apache.kafka.common.errors.ApiException)) retire(acks);
                fail(rid, "fail", text(e), false);
            } finally {
                returned[0] = true;
            }
        }

        KafkaConsumer<byte[], String> consumer() {
            if (consumer == null) {
                Properties p = new Properties();
                p.put("bootstrap.servers", bootstrap);
                p.put("client.id", "replog-" + id + "-reader");
                p.put("enable.auto.commit", "false");
                p.put("auto.offset.reset", "none");
                p.put("isolation.level", "read_uncommitted");
                p.put("fetch.max.wait.ms", "500");
                p.put("request.timeout.ms", Integer.toString(timeoutMs));
                p.put("default.api.timeout.ms", Integer.toString(timeoutMs));
                p.put("metadata.max.age.ms", "3000");
                p.put("reconnect.backoff.max.ms", "500");
                p.put("socket.connection.setup.timeout.ms", Integer.toString(timeoutMs));
                p.put("socket.connection.setup.timeout.max.ms", Integer.toString(timeoutMs));
                consumer = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new StringDeserializer());
            }
            return consumer;
        }

        /** Up to max records of key from offset: what was fetched already, else what arrives within
         * POLL_WAIT_MS; after a seek (or the key's first poll), until records come or the consumer
         * knows its position is the key's end. */
        void poll(long rid, int key, long offset, int max) {
            try {
                boolean fresh = position(key, offset);
                List<long[]> got = new ArrayList<>();
                List<String> values = new ArrayList<>();
                if (!take(key, max, got, values)) {
                    long deadline = System.currentTimeMillis() + timeoutMs;
                    TopicPartition tp = new TopicPartition(TOPIC, key);
                    do {
                        fetch(POLL_WAIT_MS);
                        if (take(key, max, got, values)) break;
                    } while (fresh && !caughtUp(tp) && System.currentTimeMillis() < deadline);
                }
                ArrayNode recs = JSON.createArrayNode();
                for (int i = 0; i < got.size(); i++) recs.addArray().add(got.get(i)[0]).add(values.get(i));
                ok(rid, recs);
            } catch (OffsetOutOfRangeException e) {
                fail(rid, "fail", "OFFSET_OUT_OF_RANGE: " + e.getMessage(), false);
            } catch (Exception e) {
                fail(rid, "fail", text(e), absent(e));
            }
        }

        /** Whether the consumer knows tp's end (high watermark) and its position is there, so a
         * fresh poll that got nothing has nothing to wait for. A known lag alone is no fetch
         * answer: currentLag asks ListOffsets for an end it does not know, and under load that
         * answered before the first fetch, so a fresh poll of offset 0 returned nothing with 13
         * acknowledged records below the end (a loaded clean-clone run, 2026-11-29). Nor is a
         * position past the known end (a negative lag): the broker answers it with records (the
         * end grew) or OFFSET_OUT_OF_RANGE, and under load that came after POLL_WAIT_MS, so a
         * poll past the end returned nothing instead of the workload's truncated-log signal
         * (another loaded clean clone, the same day). */
        boolean caughtUp(TopicPartition tp) {
            OptionalLong lag = consumer().currentLag(tp);
            return lag.isPresent() && lag.getAsLong() == 0;
        }

        /** Positions key at offset (assign or seek) unless its kept records go on from there;
         * true when it did. */
        boolean position(int key, long offset) {
            TopicPartition tp = new TopicPartition(TOPIC, key);
            Long at = next.get(key);
            if (assigned.contains(tp) && at != null && at == offset) return false;
            if (assigned.add(tp)) consumer().assign(new ArrayList<>(assigned));
            consumer().seek(tp, offset);
            consumer().resume(Collections.singleton(tp));
            next.put(key, offset);
            keptOffsets.put(key, new ArrayDeque<>());
            keptValues.put(key, new ArrayDeque<>());
            errors.remove(key);
            return true;
        }

        /** Up to max kept records of key into got/values -> whether there were any; throws the
         * key's fetch error when it comes first. */
        boolean take(int key, int max, List<long[]> got, List<String> values) {
            ArrayDeque<long[]> offs = keptOffsets.get(key);
            ArrayDeque<String> vals = keptValues.get(key);
            while (!offs.isEmpty() && got.size() < max) {
                got.add(offs.poll());
                values.add(vals.poll());
            }
            if (!got.isEmpty()) {
                next.put(key, got.get(got.size() - 1)[0] + 1);
                return true;
            }
            RuntimeException err = errors.remove(key);
            if (err != null) {
                next.put(key, null);   // the next poll seeks
                throw err;
            }
            return false;
        }

        void fetch(long waitMs) {
            try {
                for (ConsumerRecord<byte[], String> r : consumer().poll(Duration.ofMillis(waitMs))) {
                    int k = r.partition();
                    if (next.get(k) == null || errors.containsKey(k)) continue;   // sought since, or in error
                    ArrayDeque<long[]> offs = keptOffsets.get(k);
                    if (offs.size() < KEPT_RECORDS) {
                        offs.add(new long[]{r.offset()});
                        keptValues.get(k).add(r.value());
                    } else {
                        next.put(k, null);   // read nobody asks for: dropped, sought when read
                    }
                }
            } catch (OffsetOutOfRangeException e) {
                // the partitions past their log's end stop fetching (paused) until sought again
                for (TopicPartition tp : e.partitions()) {
                    errors.put(tp.partition(), e);
                    consumer().pause(Collections.singleton(tp));
                }
            }
        }

        /** The key's high watermark (ListOffsets latest, read_uncommitted). The partition is looked
         * up first: ListOffsets of a topic the brokers do not know retries until its timeout, while
         * the metadata (cached, or a broker's answer) says at once that it does not exist. */
        void endOffset(long rid, int key) {
            TopicPartition tp = new TopicPartition(TOPIC, key);
            try {
                List<PartitionInfo> parts = consumer().partitionsFor(TOPIC, Duration.ofMillis(timeoutMs));
                if (parts == null || parts.stream().noneMatch(p -> p.partition() == key)) {
                    fail(rid, "fail", "UNKNOWN_TOPIC_OR_PARTITION: the metadata has no partition " + key
                         + " of topic " + TOPIC, true);
                    return;
                }
                Long end = consumer().endOffsets(Collections.singleton(tp), Duration.ofMillis(timeoutMs)).get(tp);
                ok(rid, JSON.getNodeFactory().numberNode(end == null ? -1 : end));
            } catch (Exception e) {
                fail(rid, "fail", text(e), absent(e));
            }
        }

        /** A producer's and a consumer's classes loaded and the topic's metadata fetched once (the
         * harness warms the JVM during the set-up, so the workload's first ops do not pay for it). */
        void warm(long rid) {
            try {
                int parts = producer("all").partitionsFor(TOPIC).size();
                consumer().partitionsFor(TOPIC, Duration.ofMillis(timeoutMs));
                ok(rid, JSON.getNodeFactory().numberNode(parts));
            } catch (Exception e) {
                fail(rid, "fail", text(e), absent(e));
            }
        }

        void close() {
            for (KafkaProducer<byte[], String> p : producers.values()) {
                try { p.close(Duration.ZERO); } catch (Exception e) { /* closing anyway */ }
            }
            producers.clear();
            if (consumer != null) {
                try { consumer.close(Duration.ZERO); } catch (Exception e) { /* closing anyway */ }
                consumer = null;
            }
        }
    }
}
