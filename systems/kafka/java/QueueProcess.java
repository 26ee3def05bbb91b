/*
 * One client process of the `queue` workload in the run's client JVM (ReplogKafkaClient routes
 * the "q_" requests here; systems/kafka/java_queue.py is the other end): a transactional producer
 * (transactional.id = the process's name, transaction.timeout.ms 10 s) or, with txn=false, an
 * idempotent one, and a read_committed consumer, subscribed to the run's group or assigned.
 * Every call of one process runs on its own thread, in request order.
 *
 * Requests: q_open {bootstrap, timeout_ms, name, group, txn}, q_ready {timeout_ms},
 * q_subscribe, q_assign {keys}, q_txn {mops, abort}, q_send {key, value}, q_poll,
 * q_committed_reads {key, offset} -> {records, end}, q_stable {key}, q_close.
 * Replies: {"id", "type": ok | fail | fenced | info, "value" | "error", "completed": the txn's
 * completed micro-ops, "events": rebalances since the last reply, "protocol": the transaction
 * protocol the producer uses}.
 *
 * A transaction's outcome, by what the error proves (the rules of the librdkafka queue client,
 * systems/kafka/queue.py):
 *   where                                          | example                                     | reply
 *   initTransactions, beginTransaction, a send, a  | the coordinator not found in time, a send's | fail (the transaction
 *     poll, sendOffsetsToTransaction: an error     | NOT_ENOUGH_REPLICAS or delivery timeout, a  |  is aborted first:
 *     before the commit was asked for              | rebalance took partitions during it         |  nothing is visible)
 *   the same, and the producer is fenced, or       | PRODUCER_FENCED, INVALID_PRODUCER_EPOCH;    | fenced (fail, and the
 *     abortTransaction fails (it cannot go on)     | a producer in a fatal state                 |  process retires)
 *   aborted on purpose (abort=true)                |                                             | fail
 *   commitTransaction: ok                          |                                             | ok
 *   commitTransaction timed out (Java retries the  | the coordinator cut off or moving           | info (retire)
 *     EndTxn itself until max.block.ms = T)        |                                             |
 *   commitTransaction: fenced                      | PRODUCER_FENCED, INVALID_PRODUCER_EPOCH     | fenced
 *   commitTransaction: any other error, and        | TRANSACTION_ABORTABLE, UNKNOWN_PRODUCER_ID  | fail (the coordinator
 *     abortTransaction then succeeds               |   (Java's abortable errors of EndTxn)       |  aborted it)
 *   commitTransaction: any other error, and        | INVALID_TXN_STATE (fatal in Java): says     | info (retire)
 *     abortTransaction fails too                   |   nothing of an earlier EndTxn              |
 *   the JVM exits with the request in flight       | SIGKILL                                     | info (java_client.py)
 * After a fail the consumer seeks back to its group's committed positions (Kafka does not rewind
 * a consumer whose transaction aborted). txn=false: a send refused before it reached the
 * producer's accumulator is fail, any error the I/O thread reports is info (a fatal one retires
 * the producer); a poll's error is fail (reads change nothing), its positions committed after it.
 *
 * The transaction protocol: kafka-clients has no public API that says whether the producer
 * speaks transactions v2 (KIP-890: an epoch bump per transaction, EndTxn v5); 4.x keeps it in
 * its internal TransactionManager.isTransactionV2Enabled(), read here by reflection after each
 * commit. A client without that method (before 4.0) reports "not exposed by kafka-clients <v>".
 */
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.UnknownProducerIdException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

final class QueueProcess {
    static final String TOPIC = ReplogKafkaClient.TOPIC;
    static final long POLL_MS = 300;          // one poll micro-op waits this long for records
    static final int POLL_MAX = 64;           // records one poll micro-op takes at most
    static final int TXN_TIMEOUT_MS = 10000;  // an abandoned transaction is aborted by its coordinator after this

    /** What a request ended with, when not ok: fail, fenced or info, and the micro-ops it completed. */
    static final class Outcome extends RuntimeException {
        final String type;
        Outcome(String type, String message) {
            super(message, null, false, false);
            this.type = type;
        }
    }

    final long id;
    final String bootstrap, name, group;
    final int timeoutMs;
    final boolean txn;
    final JsonNode producerSettings;   // kafka-clients properties over the defaults (the `producer` option)
    final ExecutorService thread;
    KafkaProducer<byte[], String> producer;
    boolean initialised;
    KafkaConsumer<byte[], String> consumer, reader, hwReader;
    final ArrayNode events = ReplogKafkaClient.JSON.createArrayNode();   // the client thread's only
    boolean revoked;           // a rebalance took partitions during this transaction
    String protocol;           // the transaction protocol last read from the producer
    ObjectNode txnProducer;    // the last transaction's producer id and epoch (its records'), and the epoch after its end

    QueueProcess(long id, JsonNode args) {
        this.id = id;
        this.bootstrap = args.path("bootstrap").asText();
        this.timeoutMs = args.path("timeout_ms").asInt(5000);
        this.name = args.path("name").asText();
        this.group = args.path("group").asText();
        this.txn = args.path("txn").asBoolean(true);
        this.producerSettings = args.path("producer");
        this.thread = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "queue-" + id);
            t.setDaemon(true);
            return t;
        });
    }

    /** Runs one request on this process's thread: its reply, or the Outcome it threw. */
    void handle(long rid, String op, JsonNode args) {
        thread.execute(() -> {
            ObjectNode r = ReplogKafkaClient.JSON.createObjectNode().put("id", rid);
            ArrayNode done = ReplogKafkaClient.JSON.createArrayNode();
            try {
                r.set("value", run(op, args, done));
                r.put("type", "ok");
            } catch (Outcome o) {
                r.put("type", o.type).put("error", o.getMessage());
            } catch (Exception e) {   // a bug or an unexpected client error: nothing is claimed
                r.put("type", "info").put("error", ReplogKafkaClient.text(e));
            }
            r.set("completed", done);
            if (!events.isEmpty()) {
                r.set("events", events.deepCopy());
                events.removeAll();
            }
            if (protocol != null) r.put("protocol", protocol);
            if (op.equals("q_txn") && txnProducer != null) r.set("producer", txnProducer);
            ReplogKafkaClient.reply(r);
        });
    }

    JsonNode run(String op, JsonNode args, ArrayNode done) throws Exception {
        switch (op) {
            case "q_ready": ready(args.path("timeout_ms").asLong(60000)); return null;
            case "q_subscribe":
                consumer().subscribe(Collections.singletonList(TOPIC), listener());
                return null;
            case "q_assign": assign(args.path("keys")); return null;
            case "q_txn":
                txn(args.path("mops"), args.path("abort").asBoolean(false), args.path("abort_after_ms").asLong(0), done);
                return done;
            case "q_send": return ReplogKafkaClient.JSON.getNodeFactory().numberNode(
                send(args.path("key").asInt(), args.path("value").asText()));
            case "q_poll": return poll();
            case "q_committed_reads": return committedReads(args.path("key").asInt(), args.path("offset").asLong());
            case "q_stable": return ReplogKafkaClient.JSON.getNodeFactory().booleanNode(stable(args.path("key").asInt()));
            case "q_close": close(); return null;
            default: throw new Outcome("fail", "UNKNOWN_OP: " + op);
        }
    }

    // -- the Kafka objects ---------------------------------------------------------
    Properties common() {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("metadata.max.age.ms", "3000");
        p.put("reconnect.backoff.max.ms", "500");
        p.put("socket.connection.setup.timeout.ms", Integer.toString(timeoutMs));
        p.put("socket.connection.setup.timeout.max.ms", Integer.toString(timeoutMs));
        return p;
    }

    KafkaProducer<byte[], String> producer() {
        if (producer == null) {
            Properties p = common();
            int request = Math.max(1000, timeoutMs - 500);
            p.put("client.id", "replog-" + name);
            p.put("enable.idempotence", "true");
            p.put("acks", "all");
            p.put("linger.ms", "0");
            p.put("request.timeout.ms", Integer.toString(request));
            p.put("delivery.timeout.ms", Integer.toString(Math.max(timeoutMs, request)));
            // initTransactions, commitTransaction, abortTransaction and send()'s metadata wait block
            // up to max.block.ms: the request timeout, as librdkafka's calls are given
            p.put("max.block.ms", Integer.toString(timeoutMs));
            if (txn) {
                p.put("transactional.id", name);
                p.put("transaction.timeout.ms", Integer.toString(TXN_TIMEOUT_MS));
            }
            producerSettings.fields().forEachRemaining(e -> p.put(e.getKey(), e.getValue().asText()));
            producer = new KafkaProducer<>(p, new ByteArraySerializer(), new StringSerializer());
        }
        if (txn && !initialised) {
            try {
                producer.initTransactions();
            } catch (Exception e) {   // nothing was sent: the op did not happen
                throw beforeCommit(e, "initTransactions");
            }
            initialised = true;
        }
        return producer;
    }

    KafkaConsumer<byte[], String> consumer() {
        if (consumer == null) {
            Properties p = common();
            p.put("client.id", "replog-" + name + "-consumer");
            p.put("group.id", group);
            p.put("enable.auto.commit", "false");
            p.put("auto.offset.reset", "earliest");
            p.put("isolation.level", "read_committed");
            p.put("session.timeout.ms", "6000");
            p.put("heartbeat.interval.ms", "1000");
            p.put("max.poll.interval.ms", "60000");
            p.put("fetch.max.wait.ms", "100");
            p.put("max.poll.records", Integer.toString(POLL_MAX));
            p.put("request.timeout.ms", Integer.toString(timeoutMs));
            p.put("default.api.timeout.ms", Integer.toString(timeoutMs));
            consumer = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new StringDeserializer());
        }
        return consumer;
    }

    /** A consumer of no group (assign only): read_committed for the final reads, else the high watermark. */
    KafkaConsumer<byte[], String> reader(boolean committed) {
        KafkaConsumer<byte[], String> c = committed ? reader : hwReader;
        if (c == null) {
            Properties p = common();
            p.put("client.id", "replog-" + name + (committed ? "-reader" : "-hw"));
            p.put("enable.auto.commit", "false");
            p.put("auto.offset.reset", "none");
            p.put("isolation.level", committed ? "read_committed" : "read_uncommitted");
            p.put("fetch.max.wait.ms", "100");
            p.put("request.timeout.ms", Integer.toString(timeoutMs));
            p.put("default.api.timeout.ms", Integer.toString(timeoutMs));
            c = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new StringDeserializer());
            if (committed) reader = c; else hwReader = c;
        }
        return c;
    }

    // -- rebalances --------------------------------------------------------------------
    ConsumerRebalanceListener listener() {
        return new ConsumerRebalanceListener() {
            @Override public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                if (parts.isEmpty()) return;   // the eager protocol's call before every join
                Set<Integer> held = new TreeSet<>();
                for (TopicPartition tp : consumer.assignment()) if (!parts.contains(tp)) held.add(tp.partition());
                revoked = true;
                event("revoke", held);
            }

            @Override public void onPartitionsLost(Collection<TopicPartition> parts) {
                onPartitionsRevoked(parts);
            }

            @Override public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                Set<Integer> held = new TreeSet<>();
                for (TopicPartition tp : consumer.assignment()) held.add(tp.partition());
                event("assign", held);
            }
        };
    }

    void event(String kind, Set<Integer> keys) {
        ArrayNode e = events.addArray().add(kind);
        ArrayNode ks = e.addArray();
        for (int k : keys) ks.add(k);
    }

    // -- set-up ------------------------------------------------------------------------
    /** Until a transactional producer initialises and the group coordinator answers. */
    void ready(long waitMs) throws InterruptedException {
        long deadline = System.currentTimeMillis() + waitMs;
        Exception last = null;
        TopicPartition tp = new TopicPartition(TOPIC, 0);
        while (System.currentTimeMillis() < deadline) {
            try {
                if (txn) producer();
                consumer().committed(Collections.singleton(tp), Duration.ofMillis(timeoutMs));
                return;
            } catch (Exception e) {   // the coordinator not yet loaded, the topic being made
                last = e;
                dropProducer();   // a new producer next time (one whose init failed may be in a fatal state)
                Thread.sleep(500);
            }
        }
        throw new Outcome("fail", "Kafka served no transactions or consumer groups within " + waitMs / 1000 + "s: "
                          + (last == null ? "no answer" : last.getMessage()));
    }

    void assign(JsonNode keys) {
        List<TopicPartition> parts = new ArrayList<>();
        for (JsonNode k : keys) parts.add(new TopicPartition(TOPIC, k.asInt()));
        Map<TopicPartition, OffsetAndMetadata> committed;
        try {
            committed = consumer().committed(new java.util.HashSet<>(parts), Duration.ofMillis(timeoutMs));
        } catch (Exception e) {
            throw new Outcome("fail", "committed offsets: " + ReplogKafkaClient.text(e));
        }
        consumer().assign(parts);
        for (TopicPartition tp : parts) seekCommitted(tp, committed.get(tp));
    }

    void seekCommitted(TopicPartition tp, OffsetAndMetadata at) {
        if (at != null) consumer.seek(tp, at.offset());
        else consumer.seekToBeginning(Collections.singleton(tp));
    }

    // -- transactions ------------------------------------------------------------------
    /** One transaction. abortAfterMs > 0: the application waits that long for each send's
     * acknowledgement and, without one, aborts while the send is still in flight (as an
     * application bounding its own waits does; a scenario's `txn` step `abort_after`). */
    void txn(JsonNode mops, boolean abort, long abortAfterMs, ArrayNode done) {
        txnProducer = null;
        KafkaProducer<byte[], String> p = producer();
        revoked = false;
        try {
            p.beginTransaction();
            for (JsonNode mop : mops) {
                if (mop.path(0).asText().equals("send")) {
                    int key = mop.path(1).asInt();
                    String value = mop.path(2).asText();
                    long offset = sendOne(p, key, value, abortAfterMs);
                    done.addArray().add("send").add(key).addArray().add(offset).add(value);
                } else {
                    ObjectNode polled = pollOne();
                    done.addArray().add("poll").add(polled);
                }
            }
            if (revoked) throw new Outcome("fail", "a rebalance took partitions from this consumer during the transaction");
            Map<TopicPartition, OffsetAndMetadata> offsets = positions();
            if (!offsets.isEmpty()) p.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
            if (revoked) throw new Outcome("fail", "a rebalance took partitions from this consumer during the transaction");
        } catch (Exception e) {
            txnProducer = producerIdEpoch(p);
            Outcome err = beforeCommit(e, "transaction");
            abort(p, err);
            ended(p);
            rewind();
            throw err;
        }
        txnProducer = producerIdEpoch(p);
        if (abort) {
            Outcome err = new Outcome("fail", "aborted on purpose");
            abort(p, err);
            ended(p);
            rewind();
            throw err;
        }
        commit(p);
        protocol = protocol(p);
        ended(p);
    }

    /** The producer's epoch once its EndTxn is answered (protocol 2: one more than the transaction's). */
    void ended(KafkaProducer<byte[], String> p) {
        ObjectNode after = producerIdEpoch(p);
        if (txnProducer != null && after != null && after.path("id").asLong() == txnProducer.path("id").asLong())
            txnProducer.put("end_epoch", after.path("epoch").asInt());
    }

    /** {"id", "epoch"} of the producer's TransactionManager.producerIdAndEpoch (a private field of
     * kafka-clients: no public API gives them), or null when unreadable or not yet assigned. */
    static ObjectNode producerIdEpoch(KafkaProducer<?, ?> p) {
        try {
            Field f = KafkaProducer.class.getDeclaredField("transactionManager");
            f.setAccessible(true);
            Object tm = f.get(p);
            if (tm == null) return null;
            Field pe = tm.getClass().getDeclaredField("producerIdAndEpoch");
            pe.setAccessible(true);
            Object v = pe.get(tm);
            if (v == null) return null;
            long id = v.getClass().getField("producerId").getLong(v);
            short epoch = v.getClass().getField("epoch").getShort(v);
            if (id < 0) return null;
            return ReplogKafkaClient.JSON.createObjectNode().put("id", id).put("epoch", epoch);
        } catch (Exception e) {
            return null;
        }
    }

    long sendOne(KafkaProducer<byte[], String> p, int key, String value, long abortAfterMs) throws Exception {
        Future<RecordMetadata> f = p.send(new ProducerRecord<>(TOPIC, key, null, value));
        try {
            if (abortAfterMs > 0) {
                try {
                    return f.get(abortAfterMs, TimeUnit.MILLISECONDS).offset();
                } catch (java.util.concurrent.TimeoutException e) {
                    throw new Outcome("fail", "send: not acknowledged in " + abortAfterMs
                                      + " ms: the application aborts the transaction");
                }
            }
            return f.get(timeoutMs + 1000L, TimeUnit.MILLISECONDS).offset();
        } catch (ExecutionException e) {
            Throwable cause = e.getCause() == null ? e : e.getCause();
            if (fenced(cause)) throw new Outcome("fenced", "send: " + ReplogKafkaClient.text(cause) + " (fatal)");
            throw new Outcome("info", "send: " + ReplogKafkaClient.text(cause));
        } catch (java.util.concurrent.TimeoutException e) {
            throw new Outcome("info", "send: no delivery report");
        }
    }

    ObjectNode pollOne() {
        ObjectNode out = ReplogKafkaClient.JSON.createObjectNode();
        // nothing assigned or subscribed (an assign that failed): nothing to read, as librdkafka's consume()
        if (consumer == null || (consumer.subscription().isEmpty() && consumer.assignment().isEmpty())) return out;
        for (ConsumerRecord<byte[], String> r : consumer.poll(Duration.ofMillis(POLL_MS))) {
            String k = Integer.toString(r.partition());
            ArrayNode recs = out.has(k) ? (ArrayNode) out.get(k) : out.putArray(k);
            recs.addArray().add(r.offset()).add(r.value());
        }
        return out;
    }

    /** The consumer's positions of the partitions it holds. */
    Map<TopicPartition, OffsetAndMetadata> positions() {
        Map<TopicPartition, OffsetAndMetadata> out = new HashMap<>();
        if (consumer == null) return out;
        for (TopicPartition tp : consumer.assignment())
            out.put(tp, new OffsetAndMetadata(consumer.position(tp, Duration.ofMillis(timeoutMs))));
        return out;
    }

    /** An error before the commit was asked for: nothing of the transaction is visible. */
    static Outcome beforeCommit(Exception e, String what) {
        if (e instanceof Outcome) {
            Outcome o = (Outcome) e;
            return o.type.equals("fenced") ? o : new Outcome("fail", what + ": " + o.getMessage());
        }
        if (fenced(e)) return new Outcome("fenced", what + ": " + ReplogKafkaClient.text(root(e)) + " (fatal)");
        return new Outcome("fail", what + ": " + ReplogKafkaClient.text(e));
    }

    /** abortTransaction; a producer that is fenced or cannot abort cannot go on: fenced (the
     * transaction was never committed, so fail still holds). */
    void abort(KafkaProducer<byte[], String> p, Outcome cause) {
        if (cause.type.equals("fenced")) {
            dropProducer();
            throw cause;
        }
        try {
            p.abortTransaction();
        } catch (Exception e) {
            dropProducer();
            throw new Outcome("fenced", cause.getMessage() + " (abort failed: " + ReplogKafkaClient.text(e) + ")");
        }
    }

    void commit(KafkaProducer<byte[], String> p) {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (true) {
            try {
                p.commitTransaction();
                return;
            } catch (org.apache.kafka.common.errors.TimeoutException e) {   // safe to call again
                if (System.currentTimeMillis() < deadline) continue;
                dropProducer();
                throw new Outcome("info", "commit: " + ReplogKafkaClient.text(e));
            } catch (Exception e) {
                if (fenced(e)) {
                    dropProducer();
                    throw new Outcome("fenced", "commit: " + ReplogKafkaClient.text(root(e)) + " (fatal)");
                }
                // refused by the coordinator or the client: an abort that succeeds proves it was not committed
                try {
                    p.abortTransaction();
                } catch (Exception a) {   // e.g. INVALID_TXN_STATE: the coordinator may have committed it
                    dropProducer();
                    throw new Outcome("info", "commit: " + ReplogKafkaClient.text(root(e)) + " (abort failed: "
                                      + ReplogKafkaClient.text(root(a)) + ")");
                }
                rewind();
                throw new Outcome("fail", "commit refused: " + ReplogKafkaClient.text(root(e)));
            }
        }
    }

    /** Back to the group's committed positions of the partitions held. */
    void rewind() {
        if (consumer == null) return;
        try {
            Set<TopicPartition> held = consumer.assignment();
            if (held.isEmpty()) return;
            Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(held, Duration.ofMillis(timeoutMs));
            for (TopicPartition tp : held) seekCommitted(tp, committed.get(tp));
        } catch (Exception e) {   // the consumer cannot say where it stands: it must not go on
            throw new Outcome("fenced", "rewind to the committed positions failed: " + ReplogKafkaClient.text(e));
        }
    }

    static Throwable root(Throwable e) {
        Throwable t = e;
        while (t.getCause() != null && t.getCause() != t && t instanceof org.apache.kafka.common.KafkaException
               && !(t instanceof org.apache.kafka.common.errors.ApiException)) t = t.getCause();
        return t;
    }

    /** The producer was fenced or its epoch is gone (Jepsen's rule: fail, and the process retires). */
    static boolean fenced(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause())
            if (t instanceof ProducerFencedException || t instanceof InvalidProducerEpochException) return true;
        return false;
    }

    void dropProducer() {
        KafkaProducer<byte[], String> p = producer;
        producer = null;
        initialised = false;
        if (p != null) new Thread(() -> p.close(Duration.ZERO), "retire-" + name).start();
    }

    /** "2" or "1" as the producer's TransactionManager has it (kafka-clients internals, see the header). */
    static String protocol(KafkaProducer<?, ?> p) {
        try {
            Field f = KafkaProducer.class.getDeclaredField("transactionManager");
            f.setAccessible(true);
            Object tm = f.get(p);
            if (tm == null) return null;
            Method m = tm.getClass().getMethod("isTransactionV2Enabled");
            return ((Boolean) m.invoke(tm)) ? "2" : "1";
        } catch (NoSuchMethodException | NoSuchFieldException e) {
            return "not exposed by kafka-clients " + org.apache.kafka.common.utils.AppInfoParser.getVersion();
        } catch (Exception e) {
            return "not readable: " + e.getClass().getSimpleName();
        }
    }

    // -- outside transactions (txn=false) ------------------------------------------------
    long send(int key, String value) {
        KafkaProducer<byte[], String> p;
        Future<RecordMetadata> f;
        try {
            p = producer();
            f = p.send(new ProducerRecord<>(TOPIC, key, null, value));
        } catch (Outcome o) {
            throw o;
        } catch (Exception e) {   // refused before the accumulator: not sent
            throw new Outcome("fail", "send: " + ReplogKafkaClient.text(e));
        }
        try {
            return f.get(timeoutMs + 1000L, TimeUnit.MILLISECONDS).offset();
        } catch (ExecutionException e) {
            Throwable cause = e.getCause() == null ? e : e.getCause();
            if (cause instanceof org.apache.kafka.common.errors.ApiException && (fenced(cause)
                || cause instanceof OutOfOrderSequenceException || cause instanceof UnknownProducerIdException))
                dropProducer();
            throw new Outcome("info", "send: " + ReplogKafkaClient.text(cause));
        } catch (Exception e) {
            throw new Outcome("info", "send: no delivery report (" + ReplogKafkaClient.text(e) + ")");
        }
    }

    ObjectNode poll() {
        ObjectNode out;
        try {
            out = pollOne();
        } catch (Exception e) {
            throw new Outcome("fail", "poll: " + ReplogKafkaClient.text(e));
        }
        try {   // at least once: a commit that fails leaves the records to be read again
            Map<TopicPartition, OffsetAndMetadata> offsets = positions();
            if (!offsets.isEmpty()) consumer.commitSync(offsets, Duration.ofMillis(timeoutMs));
        } catch (Exception e) {
            System.err.println("queue " + name + ": commit after poll: " + ReplogKafkaClient.text(e));
        }
        return out;
    }

    // -- final reads ---------------------------------------------------------------------
    /** Committed records of key from offset on, and whether the read reached the last stable offset. */
    ObjectNode committedReads(int key, long offset) {
        KafkaConsumer<byte[], String> c = reader(true);
        TopicPartition tp = new TopicPartition(TOPIC, key);
        ObjectNode out = ReplogKafkaClient.JSON.createObjectNode();
        ArrayNode recs = out.putArray("records");
        long end;
        try {
            c.assign(Collections.singletonList(tp));
            c.seek(tp, offset);
            end = c.endOffsets(Collections.singleton(tp), Duration.ofMillis(timeoutMs)).get(tp);
        } catch (Exception e) {
            throw new Outcome("fail", ReplogKafkaClient.text(e));
        }
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (System.currentTimeMillis() < deadline) {
            try {
                if (c.position(tp, Duration.ofMillis(timeoutMs)) >= end) return out.put("end", true);
                for (ConsumerRecord<byte[], String> r : c.poll(Duration.ofMillis(200)))
                    recs.addArray().add(r.offset()).add(r.value());
            } catch (Exception e) {
                if (!recs.isEmpty()) return out.put("end", false);
                throw new Outcome("fail", ReplogKafkaClient.text(e));
            }
        }
        return out.put("end", false);
    }

    /** The last stable offset (read_committed ListOffsets) equals the high watermark. */
    boolean stable(int key) {
        TopicPartition tp = new TopicPartition(TOPIC, key);
        Set<TopicPartition> one = Collections.singleton(tp);
        Long lso = reader(true).endOffsets(one, Duration.ofMillis(timeoutMs)).get(tp);
        Long hw = reader(false).endOffsets(one, Duration.ofMillis(timeoutMs)).get(tp);
        return lso != null && lso.equals(hw);
    }

    /** Everything closed: the group consumer leaves its group (at most 1 s), the rest at once. */
    void close() {
        if (producer != null) {
            try { producer.close(Duration.ZERO); } catch (Exception e) { /* closing anyway */ }
            producer = null;
        }
        if (consumer != null) {
            try { consumer.close(Duration.ofSeconds(1)); } catch (Exception e) { /* closing anyway */ }
            consumer = null;
        }
        for (KafkaConsumer<byte[], String> c : new KafkaConsumer[]{reader, hwReader}) {
            if (c != null) {
                try { c.close(Duration.ZERO); } catch (Exception e) { /* closing anyway */ }
            }
        }
        reader = hwReader = null;
    }
}
