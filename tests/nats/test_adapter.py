"""The NATS adapter against a real 3-node nats-server cluster on netns:
offsets are stream sequences - 1, polls read in order from a position, the
inspector sees leaders and replicas, a leaderless stream refuses publishes
definitely, and a missing binary is one line naming the host and the fix."""
import pytest

from harness.sut import DefiniteError, IndefiniteError
from systems.nats.db import NatsMissing
from systems.nats.inspector import NatsInspector
from tests.nats.natsutil import NatsCluster, healthy, log_ready, need_root, until

pytestmark = pytest.mark.root

SUBNET = "10.221.1.0/24"


@pytest.fixture(scope="module")
def nats3():
    need_root()
    with NatsCluster(SUBNET) as c:
        c.db.setup()
        yield c


def test_sends_polls_and_inspector(nats3):
    db = nats3.db

    async def scenario():
        await log_ready(db)
        client = db.client()
        try:
            offsets = [await client.send(0, v) for v in range(10, 20)]
            other = await client.send(1, "x")
            head = await client.poll(0, 0, max_records=4)
            rest = await client.poll(0, 4)
            end = await client.end_offset(0)
            meta = await client.metadata()
            # A follower applies what the leader committed a moment later (under load
            # more than a moment): wait until each node's state has all ten.
            states = {}

            async def all_applied():
                states.update({n: await db.inspector.state(n) for n in db.nodes})
                return all(st[0].leo == 10 for st in states.values())
            await until(all_applied, timeout=15)
        finally:
            await client.close()
        return offsets, other, head, rest, end, meta, states

    offsets, other, head, rest, end, meta, states = nats3.run(scenario)
    assert offsets == list(range(10)) and other == 0
    assert head == [(i, 10 + i) for i in range(4)] and rest == [(i, 10 + i) for i in range(4, 10)]
    assert end == 10
    leader = meta[0].leader
    assert set(meta[0].replicas) == {"n1", "n2", "n3"}
    for node, state in states.items():
        assert state[0].leo == 10 and state[0].log_start == 0
        assert state[0].role == ("leader" if node == leader else "follower")
        assert state[0].leader == leader
    assert set(states[leader][0].isr) == {"n1", "n2", "n3"}


def test_a_preferred_node_is_the_server_the_client_talks_to(nats3):
    """`write: {via: NODE}` in a scenario: the writer's connection is to that node's
    server (every node once, so a random pick cannot pass by luck)."""
    db = nats3.db

    async def scenario():
        await log_ready(db)
        connected = {}
        for node in db.nodes:
            client = db.client(prefer=node)
            try:
                await client.send(0, f"via-{node}")
                connected[node] = client.nc.connected_url.hostname
            finally:
                await client.close()
        return connected

    connected = nats3.run(scenario)
    assert connected == {node: db.address(node)[0] for node in db.nodes}


def test_a_hole_in_the_stream_shows_as_an_offset_jump(nats3):
    """A deleted message (a real hole, made through JetStream's own API) is
    skipped by the poll, so the checkers see the jump instead of a stall."""
    db = nats3.db

    async def scenario():
        await log_ready(db)
        client = db.client()
        try:
            start = await client.end_offset(1)
            for v in range(40):
                await client.send(1, 1000 + v)
            await client.js.delete_msg("log-1", start + 6)  # sequence = offset + 1: offset start+5
            return start, await client.poll(1, start, max_records=100)
        finally:
            await client.close()

    start, read = nats3.run(scenario)
    offsets = [o - start for o, _ in read]
    assert offsets == [o for o in range(40) if o != 5]
    assert all(v == 1000 + o - start for o, v in read)


def test_killed_leader_publishes_fail_definitely_and_nothing_acknowledged_is_lost(nats3):
    db = nats3.db

    async def scenario():
        await log_ready(db)
        asker = db.client()
        try:
            victim = (await asker.metadata())[1].leader
        finally:
            await asker.close()
        # the writer's own server stays up, so a publish without a leader is answered
        # (no responders) rather than lost with the connection (indefinite)
        writer = next(n for n in db.nodes if n != victim)
        client = db.client(prefer=writer)
        inspector = NatsInspector(db)

        async def routes_to_victim_gone() -> bool:
            routes = (await inspector.jsz_path(writer, "/routez", 1.0)).get("routes") or []
            return not any(r.get("ip") == db.cluster.remotes[victim].address for r in routes)

        try:
            before = await client.end_offset(1)
            acked_values = list(range(100, 120))
            acked = [await client.send(1, v) for v in acked_values]
            assert (await client.metadata())[1].leader == victim
            assert not await routes_to_victim_gone()     # (the wait below can tell)
            db.kill(victim)
            # publish once the writer's server has dropped its routes to the victim: a publish
            # in the moment before goes down the dead route and times out (indefinite), and on
            # a loaded machine the election could then end before any publish was refused
            await until(routes_to_victim_gone, timeout=15, period=0.05)
            failed, unknown, v = [], [], 200
            while True:  # until a new leader takes publishes
                v += 1
                try:
                    acked_values.append(v)
                    acked.append(await client.send(1, v))
                    break
                except DefiniteError as e:
                    acked_values.pop()
                    failed.append(str(e))
                except IndefiniteError:  # the client's server died: may or may not be stored
                    acked_values.pop()
                    unknown.append(v)
            db.start(victim)
            await until(lambda: healthy(client, 2), timeout=60)
            read = await client.poll(1, before)
        finally:
            await client.close()
        return before, acked, acked_values, failed, unknown, read

    before, acked, acked_values, failed, unknown, read = nats3.run(scenario)
    assert acked[:20] == list(range(before, before + 20))
    assert failed and all("no response from stream" in e for e in failed), (failed, unknown)
    values = [v for _, v in read]
    assert values[:20] == list(range(100, 120))
    assert [v for v in values if v in acked_values] == acked_values       # every acknowledged one, in order
    assert set(values) <= set(acked_values) | set(unknown)                # nothing that definitely failed
    assert [o for o, _ in read] == list(range(before, before + len(read)))
    assert dict(read)[acked[-1]] == acked_values[-1]


def test_missing_binary_is_one_line_naming_host_and_fix(tmp_path):
    need_root()
    with NatsCluster("10.221.2.0/24", tmp=tmp_path, server_binary="nats-server-absent") as c:
        with pytest.raises(NatsMissing) as e:
            c.db.setup()
    msg = str(e.value)
    assert "\n" not in msg and "host n1" in msg and "apt-get install nats-server" in msg
