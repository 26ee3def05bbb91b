// The ZooKeeper-era lines (0.10, 0.11, 2.x): KafkaConfig and LogConfig are Scala objects there.
// jshell --class-path "$(ls build/kafka/0.10.2.2/lib/*.jar | tr '\n' :)" systems/kafka/settings/names-zk.jsh > systems/kafka/settings/0.10.txt
var b = new java.util.TreeSet<String>(scala.collection.JavaConverters.seqAsJavaList(kafka.server.KafkaConfig.configNames()));
for (var n : b) System.out.println("broker " + n);
var t = new java.util.TreeSet<String>(scala.collection.JavaConverters.seqAsJavaList(kafka.log.LogConfig.configNames()));
for (var n : t) System.out.println("topic " + n);
/exit
