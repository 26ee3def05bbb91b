"""Kafka's KRaft nodes on a cluster's hosts, through Remote calls only, so it
works on every backend. Implements harness.sut.DB, Process and Pausable.

Per node, under <work_dir>/<node>/: `server.properties` (systems/kafka/config.py),
`log4j2.properties`, `kafka.log` (the JVM's stdout and stderr) and `data/`
(log.dirs and the KRaft metadata log: everything the node persists, so a
faults layer may mount there before setup).

Set-up: every node's storage is formatted as Kafka's own
`kafka.tools.StorageTool format` does (one cluster id per run, the
eligible.leader.replicas.version feature from the `elr` option; on hosts that
share this machine's file system from a template StorageTool wrote once:
systems/kafka/storage_format.py), then each
starts as `java -Xmx... kafka.Kafka server.properties`. The jars: on a
network-namespace host, this machine's build/kafka/<version>/lib; on docker
and ssh hosts, the same folder uploaded to the host's work directory once.
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from harness.cluster.base import ClusterError
from harness.run_store import write_past_copies
from harness.sut import HostPlan, RunShape
from systems.daemons import NodeDaemons, empty_dir, last_line
from systems.kafka import install, jvm, storage_format, tiered
from systems.kafka.client import TOPIC, KafkaLogClient
from systems.kafka.config import (BROKER_PORT, CONTROLLER_PORT, LOG4J1, LOG4J1_ZOOKEEPER, LOG4J2, ZK_PORT, render, render_zk_broker,
                                  node_id, render_zookeeper, topic_config)
from systems.kafka.inspector import KafkaInspector

PROPS = "server.properties"
LOG4J = "log4j2.properties"
LOG4J_1 = "log4j.properties"   # the ZooKeeper-era brokers and ZooKeeper (log4j 1.x)
ZOO_CFG = "zoo.cfg"
# ZooKeeper era: the controller is whichever broker registers first. A broker on the
# `zk` host (id 100, no replica of the topic), started before n1..nN, is it: the
# controller is then never cut off with a replica, as KRaft's `ctl` is not.
ZK_CONTROLLER = "controller"          # its daemon's name on the zk host
ZK_CONTROLLER_LOG = "controller.log"
ZK_CONTROLLER_PROPS = "controller.properties"
ZOOKEEPER_HEAP = "128m"
ZK_SESSION_DEFAULT_MS = 6000          # zookeeper.session.timeout.ms's default in 0.10-2.x
ZK_EXPIRY_MARGIN_S = 1.0              # ZooKeeper expires sessions on its tick (500 ms here): a margin
LOG = "kafka.log"
SEGMENTS_PY = Path(__file__).resolve().with_name("segments.py")
STARTED = "Kafka Server started"   # KafkaRaftServer's line once a node (broker or controller) is up
BROKER_HEAP = "512m"
CONTROLLER_HEAP = "256m"
class KafkaMissing(ClusterError):
    """No Java on a host, or no jars: one line naming the fix."""


class KafkaDb(NodeDaemons):
    def __init__(self, cluster, plan: HostPlan, shape: RunShape, options, system):
        self.system = system
        self.cluster = cluster
        self.options = options
        self.controller = plan.roles.get("controller")   # None: combined quorum on the brokers, or ZooKeeper
        self.zookeeper = plan.roles.get("zookeeper")     # the ZooKeeper era's one ZooKeeper server
        self.zk_era = install.zk_era(options.version)
        self.kafka4 = int(options.version.split(".")[0]) >= 4
        if self.zk_era and not self.zookeeper:
            raise ClusterError(f"Kafka {options.version} runs on ZooKeeper: the plan has no `zookeeper` host")
        self.nodes = list(plan.nodes)
        role_host = self.zookeeper if self.zk_era else self.controller
        self.hosts = [*([role_host] if role_host else []), *self.nodes]
        self.voters = [self.controller] if self.controller else list(self.nodes)
        self.settings = dict(shape.settings)
        self.keys = shape.keys
        self.replication_factor = shape.replication_factor
        self.cluster_id = jvm.new_cluster_id()
        self.tiered = tiered.enabled(self.settings, options)
        self.env: dict[str, dict[str, str]] = {}
        self.lib: dict[str, str] = {}          # host -> lib folder on the host
        self.segments_py: dict[str, str] = {}  # host -> segments.py on the host
        self.started: set[str] = set()           # nodes started at least once
        self.past_copies: dict[str, list[dict]] = {}  # node -> its replicas before each restart
        self.killed_at: dict[str, float] = {}    # ZooKeeper era: node -> when it was SIGKILLed
        self.process = self
        self.pausable = self
        self._membership = None
        self._client_jvms = None
        self.inspector = KafkaInspector(self)
        self.remote_tier = tiered.KafkaRemoteTier(self, TOPIC, [node_id(n) for n in self.nodes]) \
            if self.tiered else None

    @property
    def membership(self):
        """MEMBERSHIP (made on first use: Kafka before 2.4 refuses it in one line)."""
        if self._membership is None:
            from systems.kafka.membership import KafkaMembership
            self._membership = KafkaMembership(self)
        return self._membership

    # -- where things are ------------------------------------------------
    def roles(self, node: str) -> str:
        if node == self.zookeeper:
            return "zookeeper"
        if node == self.controller:
            return "controller"
        return "broker" if self.controller else "broker,controller"

    def address(self, node: str) -> tuple[str, int]:
        return self.cluster.remotes[node].address, BROKER_PORT

    def endpoints(self) -> list[tuple[str, int]]:
        return [self.address(n) for n in self.nodes]

    def client(self, request_timeout: float = 5.0, prefer: str | None = None):
        """The workload's client: librdkafka's (KafkaLogClient), or with `client=java` one
        client process of the run's client JVM (JavaKafkaClient), which creates the topic and
        reads the metadata through the librdkafka admin path."""
        admin = self.admin_client(request_timeout, prefer)
        if self.options.client != "java":
            return admin
        from systems.kafka.java_client import JavaKafkaClient

        return JavaKafkaClient(self.client_jvms(), admin, request_timeout, idempotent=self.options.idempotent)

    def client_jvms(self):
        """The run's client JVM (started when a Java client creates the topic or by its first op;
        systems/kafka/java_client.py); its stderr goes to <work_dir>/java-client.log."""
        if self._client_jvms is None:
            import shutil

            from systems.kafka.java_build import ensure_built
            from systems.kafka.java_client import ClientJvms

            work = self.cluster.layout.work_dir
            # the `java` option names the hosts' launcher; this machine's, where it has it (netns hosts)
            java = self.options.java if shutil.which(self.options.java) else "java"
            self._client_jvms = ClientJvms(ensure_built(self.options.client_version), java=java,
                                           log_path=os.path.join(work, "java-client.log")
                                           if os.path.isdir(work) else None)
        return self._client_jvms

    def admin_client(self, request_timeout: float = 5.0, prefer: str | None = None) -> KafkaLogClient:
        """librdkafka's client (the harness's own view: topic, metadata, offsets). `prefer`
        only orders the bootstrap list: requests go to each partition's leader."""
        endpoints = self.endpoints()
        if prefer in self.nodes:
            first = self.address(prefer)
            endpoints = [first] + [e for e in endpoints if e != first]
        return KafkaLogClient(endpoints, request_timeout, idempotent=self.options.idempotent,
                              topic_config=topic_config(self.settings, self.options),
                              zk_version=self.options.version if self.zk_era else None,
                              controller=self.address(self.zookeeper) if self.zk_era else None,
                              broker_ids=[int(n[1:]) for n in self.nodes],
                              names={**({self.address(self.zookeeper): self.zookeeper} if self.zk_era else {}),
                                     **{self.address(n): n for n in self.nodes}})

    def queue_client(self, request_timeout: float, name: str, group: str, txn: bool = True):
        """TRANSACTIONS: one process's transactional producer and group consumer (systems/kafka/queue.py;
        with `client=java`, in the run's client JVM: systems/kafka/java_queue.py)."""
        if self.options.client == "java":
            from systems.kafka.java_queue import JavaQueueClient

            return JavaQueueClient(self.client_jvms(), ",".join(f"{h}:{p}" for h, p in self.endpoints()),
                                   request_timeout, name, group, txn, self.options.producer)
        from systems.kafka.queue import KafkaQueueClient

        return KafkaQueueClient(self.endpoints(), request_timeout, name, group, txn, self.options.producer)

    async def transaction_coordinator(self, transactional_id: str) -> tuple[str | None, dict]:
        """The node coordinating a transactional id, and why (systems/kafka/coordinator.py)."""
        if getattr(self, "_coordinators", None) is None:
            from systems.kafka.coordinator import Coordinators

            self._coordinators = Coordinators(",".join(f"{h}:{p}" for h, p in self.endpoints()),
                                              {node_id(n): n for n in self.nodes})
        return await self._coordinators.of(transactional_id)

    @property
    def transaction_version(self) -> int | None:
        """The cluster's transaction.version feature level as formatted (None: ZooKeeper, no levels)."""
        return self.options.transaction_version   # KafkaOptions fills in the version's default

    def client_info(self) -> dict:
        """harness.sut's client_info: the queue clients' library, its version, and the transaction
        protocol its producers used (each commit's, as the Java client's internals have it; librdkafka
        does not say which EndTxn version it speaks)."""
        cluster = {"cluster_transaction_version": self.transaction_version,
                   "cluster_transaction_version_source": "StorageTool format --feature transaction.version"
                   if self.kafka4 else f"Kafka {self.options.version}: no feature levels above 0"
                   if not self.zk_era else "ZooKeeper: no feature levels"}
        if self.options.client == "java":
            jvms = self._client_jvms
            return {**cluster, "client": "java", "version": f"kafka-clients {self.options.client_version}",
                    "transaction_protocol": dict(jvms.transaction_protocols) if jvms is not None else {},
                    "source": "the producer's TransactionManager.isTransactionV2Enabled() after each commit "
                              "(kafka-clients internals: no public API says it)"}
        import confluent_kafka

        return {**cluster, "client": "librdkafka", "version": f"librdkafka {confluent_kafka.libversion()[0]}, confluent-kafka "
                                                   f"{confluent_kafka.__version__}",
                "transaction_protocol": "not exposed by librdkafka"}

    def node_dir(self, node: str) -> str:
        return os.path.join(self.cluster.layout.work_dir, node)

    def data_dir(self, node: str) -> str:
        return os.path.join(self.node_dir(node), "data")

    def partition_dir(self, node: str, key: int) -> str:
        return os.path.join(self.data_dir(node), f"log-{key}")

    def data_files(self, node: str) -> list[str]:
        """The topic's segments, offset and time indexes, leader-epoch
        checkpoints, and the log dir's offset checkpoints."""
        d = self.data_dir(node)
        part = os.path.join(d, "log-*")
        return [os.path.join(part, "*.log"), os.path.join(part, "*.index"), os.path.join(part, "*.timeindex"),
                os.path.join(part, "leader-epoch-checkpoint"), os.path.join(d, "*-checkpoint")]

    def remote_dir(self) -> str:
        """Tiered storage's remote directory, shared by every broker of the run."""
        return tiered.remote_dir(self.cluster.layout.work_dir)

    def props_path(self, node: str) -> str:
        return os.path.join(self.node_dir(node), PROPS)

    def log_path(self, node: str) -> str:
        return os.path.join(self.node_dir(node), LOG)

    def set_env(self, node: str, env: dict[str, str]) -> None:
        self.env[node] = dict(env)

    # -- install -----------------------------------------------------------
    def _install_host(self, node: str, local_lib: Path, addresses: dict[str, str], tmp: str) -> None:
        remote = self.cluster.remotes[node]
        problem = install.java_problem(remote, self.options.java)
        if problem:
            raise KafkaMissing(problem)
        if self.tiered and _separate_filesystem(remote):
            raise KafkaMissing(f"host {node}: tiered storage needs a remote directory every broker shares; "
                               f"only netns hosts (this machine's file system) have one")
        if _separate_filesystem(remote):
            lib = os.path.join(self.cluster.layout.work_dir, "kafka-lib", self.options.version)
            if remote.run(["test", "-f", os.path.join(lib, install.broker_jar(self.options.version))],
                          check=False).returncode != 0:
                remote.run(["mkdir", "-p", os.path.dirname(lib)])
                remote.put(str(local_lib), lib)
            seg = os.path.join(self.cluster.layout.work_dir, "kafka-segments.py")
            remote.put(str(SEGMENTS_PY), seg)
        else:
            lib, seg = str(local_lib), str(SEGMENTS_PY)
        self.lib[node], self.segments_py[node] = lib, seg
        remote.run(["mkdir", "-p", self.data_dir(node)])
        if self.zk_era:
            self._install_zk_era(node, addresses, tmp)
            return
        store = None
        if self.tiered:
            store = (str(install.tiered_jar(self.options.version)), self.remote_dir())
            remote.run(["mkdir", "-p", self.remote_dir()])
        props = render(node, self.roles(node), addresses, self.voters, self.data_dir(node), self.settings,
                       self.options, self.replication_factor, tiered_store=store)
        for name, text in ((PROPS, props), (LOG4J, LOG4J2)):
            local = os.path.join(tmp, f"{node}-{name}")
            Path(local).write_text(text)
            remote.put(local, os.path.join(self.node_dir(node), name))
        self._format(node)

    def _features(self) -> list[str]:
        """StorageTool's --feature arguments (3.9 knows neither feature's levels above 0:
        KIP-966 and KIP-890 are 4.0's)."""
        if not self.kafka4:
            return []
        return ["--feature", f"eligible.leader.replicas.version={1 if self.options.elr else 0}",
                "--feature", f"transaction.version={self.transaction_version}"]

    def _format(self, node: str) -> None:
        """The node's data directory formatted with the run's cluster id (meta.properties
        gets the node id and a new directory id): from the version's format template
        (systems/kafka/storage_format.py: StorageTool ran once) on hosts that share this
        machine's file system, else by Kafka's StorageTool on the host."""
        remote = self.cluster.remotes[node]
        template = None
        if self.lib[node] == str(install.lib_dir(self.options.version)):
            try:
                template = storage_format.template_for(self.options.version, self.options.java, self._features(),
                                                       Path(self.props_path(node)).read_text())
            except (storage_format.FormatError, OSError, subprocess.SubprocessError) as err:
                raise ClusterError(f"{node}: {err}") from None
        if template is not None:
            try:
                storage_format.fill(template, self.data_dir(node), self.cluster_id, node_id(node), remote.put)
            except (storage_format.FormatError, OSError) as err:
                raise ClusterError(f"{node}: formatting its storage from {template}: {err}") from None
        else:
            fmt = [*self._java(node, "128m"), "kafka.tools.StorageTool", "format", "--ignore-formatted",
                   "-t", self.cluster_id, "-c", self.props_path(node), *self._features()]
            out = remote.run(fmt, check=False, timeout=120)
            if out.returncode != 0:
                raise ClusterError(f"{node}: {storage_format.failure(out)}")
        # StorageTool does not fsync what it writes (meta.properties, bootstrap.checkpoint); on a real
        # machine the OS writes them back long before a test's power failure, so make them durable
        # here (`sync FILE...` fsyncs files and directories), or a power fault under lazyfs would
        # leave a broker that cannot start, which is not what a test of the log is about.
        remote.run(["find", self.data_dir(node), "-exec", "sync", "{}", "+"], check=False, timeout=60)

    def wipe(self, node: str) -> dict:
        """WIPE: the stopped broker's disk replaced. KRaft: its data directory emptied and
        formatted again with the run's cluster id (same node id, a new directory id);
        ZooKeeper era: an empty log directory (the broker writes meta.properties itself).
        The replicas it held are kept first as a past copy (the replica diff's divergence check)."""
        if node not in self.nodes:
            raise ClusterError(f"{node} is not a broker: only a broker's disk can be replaced")
        self._keep_past_copy(node)
        remote = self.cluster.remotes[node]
        before = _directory_id(remote, self.data_dir(node))
        out = {"files_removed": empty_dir(remote, self.data_dir(node))}
        if self.zk_era:
            out["registration"] = self._drop_zk_registration(node)
        else:
            self._format(node)
            out.update(cluster_id=self.cluster_id, directory_id={"old": before,
                                                                 "new": _directory_id(remote, self.data_dir(node))},
                       registration=self.unregister(node))
        return out

    def unregister(self, node: str) -> str:
        """KRaft: the broker's registration removed at the controller (UnregisterBroker, as its
        session's expiry or an operator's `kafka-cluster.sh unregister` would), so that the next
        incarnation registers at once -> "unregistered" | "absent" | why not."""
        from systems.kafka.registration import RegistrationError, unregister_broker

        controllers = [self.controller] if self.controller else [v for v in self.voters if v != node]
        why = "no controller to ask"
        for c in controllers:
            try:
                error = unregister_broker(self.cluster.remotes[c].address, CONTROLLER_PORT, node_id(node))
            except RegistrationError as e:
                why = str(e)
                continue
            if error is None:
                return "unregistered"
            if error == "BROKER_ID_NOT_REGISTERED":
                return "absent"
            why = error
        return f"not unregistered ({why})"

    def _install_zk_era(self, node: str, addresses: dict[str, str], tmp: str) -> None:
        """zoo.cfg on the ZooKeeper host, server.properties on a broker, log4j 1.x on both;
        nothing to format (the broker registers itself in ZooKeeper)."""
        remote = self.cluster.remotes[node]
        if node == self.zookeeper:
            ctl = render_zk_broker(node, addresses, self.zookeeper, os.path.join(self.node_dir(node), "controller-data"),
                                   self.settings, self.options, self.replication_factor)
            files = ((ZOO_CFG, render_zookeeper(self.data_dir(node), addresses[node])), (LOG4J_1, LOG4J1_ZOOKEEPER),
                     (ZK_CONTROLLER_PROPS, ctl))
        else:
            props = render_zk_broker(node, addresses, self.zookeeper, self.data_dir(node), self.settings,
                                     self.options, self.replication_factor)
            files = ((PROPS, props), (LOG4J_1, LOG4J1))
        for name, text in files:
            local = os.path.join(tmp, f"{node}-{name}")
            Path(local).write_text(text)
            remote.put(local, os.path.join(self.node_dir(node), name))

    def install(self) -> None:
        """Java and the jars on every host, properties rendered, storage formatted
        (the hosts in parallel: each format is a JVM start)."""
        try:
            local_lib = install.ensure_jars(self.options.version)
            if self.tiered:
                install.ensure_tiered_jar(self.options.version)
        except install.KafkaUnavailable as e:
            raise KafkaMissing(str(e)) from None
        if not all(_separate_filesystem(self.cluster.remotes[h]) for h in self.hosts):
            jvm.ensure_archive(self.options.version, self.options.java)   # once per version and Java
        addresses = {h: self.cluster.remotes[h].address for h in self.hosts}
        with tempfile.TemporaryDirectory() as tmp, concurrent.futures.ThreadPoolExecutor(len(self.hosts)) as pool:
            for f in [pool.submit(self._install_host, h, local_lib, addresses, tmp) for h in self.hosts]:
                f.result()

    def setup(self) -> None:
        self.install()
        if self.zk_era:
            self.start(self.zookeeper)
            self._await_zookeeper()
            self._start_zk_controller()
            for n in self.nodes:
                self.start(n)
            return
        for n in self.hosts:
            self.start(n)
        # every node's start line (a JVM takes 10 s on an idle 2-core machine and minutes on a
        # loaded one; the workload's own 60 s for creating the log then starts from a cluster that is up)
        self.wait_logged(self.hosts, STARTED)
        if self.tiered:
            self.wait_logged(self.nodes, tiered.RLMM_READY)

    def wait_logged(self, nodes: list[str], line: str, timeout: float = 180.0) -> None:
        """Until every one of `nodes` logged `line`: each node's start line, and with tiered
        storage each broker's remote log metadata manager ready (until then a broker that dies
        before `__remote_log_metadata` exists with its replication factor would leave the others
        retrying, and a scenario's first kill is often at once). A node whose process exited
        ends the wait at once (startup_problem says why)."""
        import time

        pending = set(nodes)
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for node in sorted(pending):
                if self.cluster.remotes[node].run(["grep", "-q", "-F", line, self.log_path(node)],
                                                  check=False).returncode == 0:
                    pending.discard(node)
            if pending and self.startup_problem():
                return
            if pending:
                time.sleep(0.5)

    def _start_zk_controller(self, timeout: float = 90.0) -> None:
        """The controller broker on the zk host; n1..nN start once it answers ApiVersions
        (0.10.2-2.8 answer requests only after the controller's startup: it won the election)."""
        import time as _time

        remote = self.cluster.remotes[self.zookeeper]
        argv = [*self._java(self.zookeeper, CONTROLLER_HEAP), "kafka.Kafka",
                os.path.join(self.node_dir(self.zookeeper), ZK_CONTROLLER_PROPS)]
        remote.start_daemon(ZK_CONTROLLER, argv, os.path.join(self.node_dir(self.zookeeper), ZK_CONTROLLER_LOG))
        host, port = self.address(self.zookeeper)
        probe = ("import socket,struct,sys\ntry:\n  s=socket.create_connection((sys.argv[1],int(sys.argv[2])),1)\n"
                 "  s.settimeout(1); b=struct.pack('>hhih',18,0,1,5)+b'probe'\n"
                 "  s.sendall(struct.pack('>i',len(b))+b); d=s.recv(8)\n"
                 "  sys.exit(0 if len(d)==8 and struct.unpack('>i',d[4:])[0]==1 else 1)\n"
                 "except OSError: sys.exit(1)\n")
        end = _time.monotonic() + timeout
        while _time.monotonic() < end:
            if not remote.daemon_running(ZK_CONTROLLER):
                out = remote.run(["tail", "-n", "5", os.path.join(self.node_dir(self.zookeeper), ZK_CONTROLLER_LOG)],
                                 check=False).stdout
                raise ClusterError(f"the controller broker on {self.zookeeper} exited at startup: {last_line(out)}")
            if remote.run([self.cluster.layout.python, "-c", probe, host, str(port)], check=False,
                          timeout=10).returncode == 0:
                return
            _time.sleep(0.5)
        raise ClusterError(f"the controller broker on {self.zookeeper} does not answer after {timeout:.0f} s")

    def _await_zookeeper(self, timeout: float = 60.0) -> None:
        """Until ZooKeeper accepts connections (a 0.10.2 broker that cannot reach it
        within zookeeper.connection.timeout.ms exits), asked from the ZooKeeper host."""
        remote = self.cluster.remotes[self.zookeeper]
        probe = ("import socket,sys,time\nend=time.time()+%f\nwhile time.time()<end:\n"
                 "  try:\n    socket.create_connection((sys.argv[1],%d),1).close(); sys.exit(0)\n"
                 "  except OSError: time.sleep(0.2)\nsys.exit(1)\n" % (timeout, ZK_PORT))
        out = remote.run([self.cluster.layout.python, "-c", probe, remote.address], check=False, timeout=timeout + 10)
        if out.returncode != 0:
            why = self.exited_at_startup([self.zookeeper], "ZooKeeper")
            raise ClusterError(why or f"ZooKeeper on {self.zookeeper} does not accept connections on port "
                                      f"{ZK_PORT} after {timeout:.0f} s")

    # -- processes -----------------------------------------------------------
    def _java(self, node: str, heap: str) -> list[str]:
        log = (f"-Dlog4j.configuration=file:{os.path.join(self.node_dir(node), LOG4J_1)}" if self.zk_era else
               f"-Dlog4j2.configurationFile={os.path.join(self.node_dir(node), LOG4J)}")
        archive = (jvm.archive_flags(self.options.version, self.options.java)
                   if self.lib[node] == str(install.lib_dir(self.options.version)) else [])
        return [self.options.java, f"-Xms{heap}", f"-Xmx{heap}", *jvm.JVM_FLAGS, *archive, log,
                "-cp", os.path.join(self.lib[node], "*")]

    def start(self, node: str) -> None:
        if node == self.zookeeper:
            argv = [*self._java(node, ZOOKEEPER_HEAP), "org.apache.zookeeper.server.ZooKeeperServerMain",
                    os.path.join(self.node_dir(node), ZOO_CFG)]
            self.cluster.remotes[node].start_daemon(node, argv, self.log_path(node), env=self.env.get(node) or None)
            return
        if node in self.nodes and node in self.started and not self.running(node):
            self._keep_past_copy(node)
            self._wait_out_zk_session(node)
        self.started.add(node)
        heap = CONTROLLER_HEAP if node == self.controller else BROKER_HEAP
        argv = [*self._java(node, heap), "kafka.Kafka", self.props_path(node)]
        self.cluster.remotes[node].start_daemon(node, argv, self.log_path(node), env=self.env.get(node) or None)

    def kill(self, node: str) -> None:
        super().kill(node)
        if self.zk_era and node in self.nodes:
            self.killed_at[node] = time.monotonic()

    def _wait_out_zk_session(self, node: str) -> None:
        """ZooKeeper era: a broker killed less than a session ago is still registered (its
        ephemeral /brokers/ids/N lives until ZooKeeper expires the session), and a broker
        started then exits at once ("A broker is already registered on the path
        /brokers/ids/N ... restarted it faster than the zookeeper session timeout"): wait
        the session out (and a tick of ZooKeeper's expiry check) first."""
        killed = self.killed_at.pop(node, None)
        if killed is None:
            return
        session = self.settings.get("zookeeper.session.timeout.ms", self.settings.get(
            "broker.session.timeout.ms", ZK_SESSION_DEFAULT_MS))
        left = killed + float(session) / 1000 + ZK_EXPIRY_MARGIN_S - time.monotonic()
        if left > 0:
            time.sleep(left)

    def _drop_zk_registration(self, node: str) -> str:
        """ZooKeeper era: the replaced broker's old registration (`/brokers/ids/<id>`, an
        ephemeral node of its dead session) deleted, as the session's expiry would, so that
        the new incarnation registers when it starts instead of waiting the session out:
        a replacement must not take longer than a session (the `replaced-disk` scenario holds
        its leader's requests meanwhile, and the leader's session is as long)."""
        remote = self.cluster.remotes[self.zookeeper]
        path = f"/brokers/ids/{node_id(node)}"
        argv = [*self._java(self.zookeeper, "64m"), "org.apache.zookeeper.ZooKeeperMain", "-server",
                f"{remote.address}:{ZK_PORT}", "delete", path]
        out = remote.run(argv, check=False, timeout=90)
        self.killed_at.pop(node, None)
        text = (out.stdout + out.stderr)
        return "absent" if "Node does not exist" in text else ("deleted" if out.returncode == 0 else
                                                              f"not deleted ({last_line(text)})")

    def _keep_past_copy(self, node: str) -> None:
        """The stopped broker's replicas as its disk holds them, before it restarts.

        Why: a returning broker truncates what the leader does not have, so the final
        dumps no longer show a committed record that an unclean leader overwrote; the
        replica diff compares these copies (committed below their HW checkpoint) with
        the final ones for divergence only (checkers.replica_diff)."""
        copy = self.read_dump(node)
        if copy is not None:
            self.past_copies.setdefault(node, []).append(copy)

    def startup_problem(self) -> str | None:
        return self.exited_at_startup([h for h in self.hosts if h in self.lib], "the Kafka node")

    def teardown(self, grace: float = 20.0) -> None:
        """Brokers first (a controlled shutdown needs the controller), then the quorum; a client
        JVM still running (its event loop ended without stopping it) is killed."""
        if self._client_jvms is not None:
            self._client_jvms.kill()
        self.stop_daemons(self.nodes, grace)
        if self.zookeeper:
            self._stop_zk_controller(grace)
        for role_host in (self.controller, self.zookeeper):
            if role_host:
                self.stop_daemons([role_host], grace)

    def _stop_zk_controller(self, grace: float) -> None:
        import signal as _signal
        import time as _time

        remote = self.cluster.remotes[self.zookeeper]
        remote.signal(ZK_CONTROLLER, _signal.SIGCONT)
        remote.signal(ZK_CONTROLLER, _signal.SIGTERM)
        end = _time.monotonic() + grace
        while _time.monotonic() < end and remote.daemon_running(ZK_CONTROLLER):
            _time.sleep(0.1)
        remote.signal(ZK_CONTROLLER, _signal.SIGKILL)

    def collect(self, node: str, dest: Path) -> None:
        """The node's log, properties and offset checkpoints and, the node being
        stopped, the dump of its replica of every key (its segment files)."""
        dest.mkdir(parents=True, exist_ok=True)
        remote = self.cluster.remotes[node]
        for path in (self.log_path(node), self.props_path(node)):
            try:
                remote.get(path, str(dest / os.path.basename(path)))
            except Exception:  # never started, or the host is gone
                pass
        if node == self.zookeeper:
            for name in (ZK_CONTROLLER_LOG, ZK_CONTROLLER_PROPS):
                try:
                    remote.get(os.path.join(self.node_dir(node), name), str(dest / name))
                except Exception:
                    pass
        if node in (self.controller, self.zookeeper) or node not in self.lib:
            return
        data = self.stored_data_dir(node)
        out = remote.run(["find", data, "-maxdepth", "2", "-name", "*checkpoint"], check=False)
        for path in out.stdout.split():
            rel = os.path.relpath(path, data)
            if rel.startswith("log-") or "/" not in rel:
                try:
                    remote.get(path, str(dest / "checkpoints" / rel))
                except Exception:
                    pass
        write_past_copies(dest, self.past_copies.get(node, []))
        if not self.running(node):
            dump = self.read_dump(node)
            if dump is not None:
                (dest / "dump.json").write_text(json.dumps(dump, separators=(",", ":")))

    def stored_data_dir(self, node: str) -> str:
        """Where the stopped node's files are: its data directory or, once a power
        fault's layer is unmounted, the layer's backing folder `<data_dir>.backing`
        (nemesis/power.py writes out what the layer held before it unmounts)."""
        data = self.data_dir(node)
        backing = data.rstrip("/") + ".backing"
        probe = self.cluster.remotes[node].run(
            ["sh", "-c", 'if [ -d "$2" ] && ! ls -d "$1"/log-* >/dev/null 2>&1; then echo "$2"; else echo "$1"; fi',
             "sh", data, backing], check=False)
        return probe.stdout.strip() or data

    def read_dump(self, node: str) -> dict | None:
        """Every record of the node's replicas of the topic, from its segment files
        (systems/kafka/segments.py on the host: python3 only)."""
        remote = self.cluster.remotes[node]
        out = remote.run([self.cluster.layout.python, self.segments_py[node], self.stored_data_dir(node), "log",
                          "--broker", str(int(node[1:]))], check=False, timeout=300)
        if out.returncode != 0:
            return None
        try:
            return json.loads(out.stdout)
        except ValueError:
            return None


def _directory_id(remote, data_dir: str) -> str | None:
    """`directory.id` of a KRaft log directory's meta.properties (None: none yet)."""
    out = remote.run(["sh", "-c", 'grep "^directory.id=" "$1/meta.properties" 2>/dev/null | cut -d= -f2', "sh",
                      data_dir], check=False)
    return out.stdout.strip() or None


def _separate_filesystem(remote) -> bool:
    """True for hosts reached over SSH (docker, ssh): files must be uploaded;
    netns hosts share this machine's file system."""
    return getattr(remote, "netns", None) is None and type(remote).__name__ != "LocalRemote"
