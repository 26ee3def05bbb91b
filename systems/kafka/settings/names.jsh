// Prints every setting name a Kafka broker and a topic accept, one per line:
// "broker <name>" (KafkaConfig) and "topic <name>" (LogConfig). Run by
// systems/kafka/settings.py --refresh against a version's jars; its output is
// committed as settings/<major.minor>.txt, so that a run refuses an unknown
// setting before any host (or JVM) exists.
var b = new java.util.TreeSet<String>(kafka.server.KafkaConfig.configDef().names());
for (var n : b) System.out.println("broker " + n);
var t = new java.util.TreeSet<String>(org.apache.kafka.storage.internals.log.LogConfig.configNames());
for (var n : t) System.out.println("topic " + n);
/exit
