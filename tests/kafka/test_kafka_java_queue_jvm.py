"""The queue workload's Java client processes (systems/kafka/java_queue.py) and the run's
client JVM, without a cluster (a real JVM, the real program; the bootstrap is a closed
port): a transaction in flight when the JVM is SIGKILLed is `info` (IndefiniteError); a
process whose JVM died between two ops lost its producer and consumer with it, so its next
op is refused before anything is sent (Fenced: `fail`, the process retires) and starts no
JVM; a new process opens in a new JVM."""
import asyncio

import pytest

from harness.sut import Fenced, IndefiniteError
from systems.kafka.java_build import ensure_built
from systems.kafka.java_client import ClientJvms
from systems.kafka.java_queue import JavaQueueClient

pytestmark = [pytest.mark.root, pytest.mark.timeout(300)]
NOWHERE = "127.0.0.1:9"   # discard port: nothing listens for Kafka there


async def _gone(jvms: ClientJvms) -> None:
    jvm = jvms.current
    jvm.kill()
    while jvm.exited is None:
        await asyncio.sleep(0.05)


def test_a_killed_jvm_ends_the_transaction_in_flight_as_info_and_fences_its_idle_processes(tmp_path):
    jvms = ClientJvms(ensure_built("4.1.1"), log_path=str(tmp_path / "java-client.log"))

    async def scenario():
        busy = JavaQueueClient(jvms, NOWHERE, 2.0, "p-busy", "g", txn=True)
        idle = JavaQueueClient(jvms, NOWHERE, 2.0, "p-idle", "g", txn=True)
        await idle.subscribe([0, 1])   # the consumer subscribes locally: no broker needed
        first = jvms.pid()
        txn = asyncio.create_task(busy.txn([["send", 0, 1], ["poll"]]))   # waits on initTransactions
        await asyncio.sleep(0.5)
        await _gone(jvms)
        try:
            await txn
            in_flight = None
        except Exception as e:  # noqa: BLE001 - the outcome under test
            in_flight = e
        try:
            await idle.txn([["send", 0, 2]])
            later = None
        except Exception as e:  # noqa: BLE001
            later = e
        started_for_it = jvms.pid()
        fresh = JavaQueueClient(jvms, NOWHERE, 2.0, "p-new", "g", txn=True)
        await fresh.subscribe([0])
        second = jvms.pid()
        for c in (busy, idle, fresh):
            await c.close()
        await jvms.current.stop()
        return first, in_flight, later, started_for_it, second

    first, in_flight, later, started_for_it, second = asyncio.run(scenario())
    assert first is not None
    assert isinstance(in_flight, IndefiniteError) and "client JVM exited" in str(in_flight), in_flight
    assert isinstance(later, Fenced) and "client JVM is gone" in str(later), later
    assert started_for_it is None, "a process whose JVM is gone starts none"
    assert second is not None and second != first
