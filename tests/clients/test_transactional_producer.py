"""The emulator's transactional producer and READ_COMMITTED consumer against the transaction coordinator."""

from __future__ import annotations

import contextlib

import pytest

from minibroker.broker.config import ConfigError, ProducerConfig
from minibroker.clients import TransactionalProducer
from minibroker.clients import transactional_producer as tp_states
from minibroker.common.errors import Errors
from minibroker.common.messages import PartitionProduceResponse, ProduceResponse, TopicPartition
from minibroker.coordinator.transaction.transaction_metadata import COMPLETE_ABORT, COMPLETE_COMMIT, ONGOING
from minibroker.sim import TopicSpec, open_cluster
from tests.coordinator.group.helpers import traced
from tests.coordinator.transaction.test_kip890 import V0
from tests.coordinator.transaction.test_kip890 import _cluster as kip890_cluster
from tests.coordinator.transaction.test_transaction_coordinator import _cluster as coordinator_cluster

T0 = TopicPartition("t", 0)


def _cluster():
    """Three brokers, t-0 on all three, __transaction_state-0 and __consumer_offsets-0 led by broker 0."""
    return coordinator_cluster(**{"offsets.topic.num.partitions": 1})


def _txn(cluster, txn_id: str):
    broker = cluster.transaction_coordinator_for(txn_id)
    return cluster.brokers[broker].transaction_coordinator.transactions[txn_id]


async def _until(cluster, txn_id: str, state: str) -> None:
    while _txn(cluster, txn_id).state != state:
        await cluster.clock.sleep_until(cluster.now() + 1)


def _log(cluster, tp=T0):
    return cluster.brokers[cluster.leader_of(tp)].replica_manager.partition(tp).log


async def test_a_committed_transaction_is_read_by_a_read_committed_consumer_after_its_marker(autojump_clock):
    async with _cluster() as (cluster, sink):
        producer = cluster.producer("p", {"transactional.id": "tx"})
        assert isinstance(producer, TransactionalProducer)
        init = await producer.init_transactions().wait()
        assert init.errors == {"tx": "NONE"} and producer.epoch == 0
        producer.begin_transaction()
        sent = await producer.send("t", 0, 3).wait()
        assert sent.errors == {"t-0": "NONE"}
        assert _txn(cluster, "tx").state == ONGOING
        log = _log(cluster)
        assert (log.high_watermark, log.last_stable_offset) == (3, 0)
        consumer = cluster.consumer("c", {"isolation.level": "read_committed"})
        consumer.assign([T0])
        (fetch,) = await consumer.poll()
        assert fetch.records == {"t-0": 0}
        ended = await producer.commit_transaction().wait()
        assert ended.errors == {"tx": "NONE"} and producer.state == tp_states.READY
        while _txn(cluster, "tx").state != COMPLETE_COMMIT:
            await cluster.clock.sleep_until(cluster.now() + 1)
        (fetch,) = await consumer.poll()
        # the 3 records; the COMMIT marker (offset 3) is not handed to the application
        assert fetch.records == {"t-0": 3}
        assert consumer.received[T0] == [(0, 3)] and consumer.positions[T0] == 4
        kinds = [e["kind"] for e in sink if e["kind"].startswith("client.") and e["client"] == "p"]
        assert kinds == [
            "client.init_producer_id",
            "client.init_producer_id.done",
            "client.txn.begin",
            "client.produce",
            "client.produce.done",
            "client.end_txn",
            "client.end_txn.done",
        ]


async def test_a_read_committed_consumer_skips_an_aborted_transaction_a_plain_one_reads_it(autojump_clock):
    async with _cluster() as (cluster, _):
        producer = cluster.producer("p", {"transactional.id": "tx"})
        plain = cluster.producer("q")
        await producer.init_transactions().wait()
        producer.begin_transaction()
        await producer.send("t", 0, 2).wait()
        await plain.send_and_wait("t", 0, 1)  # offset 2, outside the transaction
        assert (await producer.abort_transaction().wait()).errors == {"tx": "NONE"}
        while _txn(cluster, "tx").state != COMPLETE_ABORT:
            await cluster.clock.sleep_until(cluster.now() + 1)
        committed = cluster.consumer("rc", {"isolation.level": "read_committed"})
        uncommitted = cluster.consumer("ru")
        for consumer in (committed, uncommitted):
            consumer.assign([T0])
            await consumer.poll()
            assert consumer.positions[T0] == 4
        assert committed.received[T0] == [(2, 1)]
        assert uncommitted.received[T0] == [(0, 2), (2, 1)]


async def test_send_offsets_commits_the_groups_offsets_with_the_transaction(autojump_clock):
    async with _cluster() as (cluster, _):
        producer = cluster.producer("p", {"transactional.id": "tx"})
        await producer.init_transactions().wait()
        producer.begin_transaction()
        producer.send("t", 0, 1)
        offsets = await producer.send_offsets_to_transaction({T0: 7}, "g").wait()
        assert offsets.errors == {"t-0": "NONE"}
        assert TopicPartition("__consumer_offsets", 0) in producer.partitions
        await producer.commit_transaction().wait()
        while _txn(cluster, "tx").state != COMPLETE_COMMIT:
            await cluster.clock.sleep_until(cluster.now() + 1)
        coordinator = cluster.brokers[cluster.coordinator_for("g")].coordinator
        assert coordinator.offsets["g"][T0].offset == 7


async def test_a_zombie_is_fenced_by_a_new_init_of_its_transactional_id(autojump_clock):
    async with _cluster() as (cluster, _):
        zombie = cluster.producer("z", {"transactional.id": "tx"})
        await zombie.init_transactions().wait()
        zombie.begin_transaction()
        await zombie.send("t", 0, 1).wait()
        successor = cluster.producer("s", {"transactional.id": "tx"})
        init = await successor.init_transactions().wait()
        # the zombie's open transaction is aborted with epoch 1; the retried init then gets epoch 2
        assert init.errors == {"tx": "NONE"} and successor.epoch == 2
        assert [error for _, api, error in successor.errors] == ["CONCURRENT_TRANSACTIONS"] * len(
            successor.errors
        )
        assert successor.errors
        late = await zombie.send("t", 0, 1).wait()
        assert late.errors == {"t-0": "INVALID_PRODUCER_EPOCH"}
        assert zombie.state == tp_states.ABORTABLE_ERROR
        commit = await zombie.commit_transaction().wait()
        assert (commit.errors, commit.cause) == ({"tx": "INVALID_PRODUCER_EPOCH"}, "immediate")
        abort = await zombie.abort_transaction().wait()
        assert abort.errors == {"tx": "PRODUCER_FENCED"} and zombie.state == tp_states.FATAL_ERROR
        after = await zombie.init_transactions().wait()
        assert after.errors == {"tx": "PRODUCER_FENCED"}


async def test_a_crashed_producer_sends_nothing_more_and_its_pending_calls_fail(autojump_clock):
    async with _cluster() as (cluster, _):
        producer = cluster.producer("p", {"transactional.id": "tx"})
        await producer.init_transactions().wait()
        producer.begin_transaction()
        await producer.send("t", 0, 1).wait()
        producer.crash()
        commit = producer.commit_transaction()
        assert (commit.errors, commit.cause) == ({"tx": "NETWORK_EXCEPTION"}, "network")
        await cluster.clock.sleep_until(cluster.now() + 1000)
        assert _txn(cluster, "tx").state == ONGOING  # left to the transaction timeout


def test_a_transactional_producer_needs_acks_all_and_refuses_plain_produce():
    class Ctx:
        class network:
            @staticmethod
            def register(*args):
                pass

    from minibroker.broker.config import ProducerConfig

    with pytest.raises(ConfigError, match="acks = all"):
        TransactionalProducer(Ctx(), "p", ProducerConfig(acks=1, transactional_id="tx"))
    producer = TransactionalProducer(Ctx(), "p", ProducerConfig(transactional_id="tx"))
    with pytest.raises(TypeError, match="send records with send"):
        producer.produce({})


async def test_a_call_the_coordinator_never_answers_fails_at_max_block_ms(autojump_clock):
    async with _cluster() as (cluster, sink):
        settings = {
            "transactional.id": "tx",
            "request.timeout.ms": 1000,
            "minibroker.response.grace.ms": 1000,
            "max.block.ms": 5000,
        }
        producer = cluster.producer("p", settings)
        cluster.drop_link("p", 0)
        start = cluster.now()
        init = await producer.init_transactions().wait()
        # tries at +0 and +2100 time out after 2000 ms; the one at +4200 is cut at +5000
        assert (init.errors, init.cause, init.latency_ms) == ({"tx": "REQUEST_TIMED_OUT"}, "expiry", 5000)
        retries = [e["time_ms"] - start for e in sink.of_kind("client.txn.retry")]
        assert retries == [2000, 4100]
        assert producer.state == tp_states.UNINITIALIZED
        cluster.heal_link("p", 0)
        assert (await producer.init_transactions().wait()).errors == {"tx": "NONE"}


async def _send_verified_by_broker_1(cluster, sink):
    """w-0 on broker 1 alone; a transactional producer's first send, run until broker 1 verifies it."""
    cluster.create_topic(TopicSpec("w", 1, 1, assignment=((1,),)))
    await cluster.clock.sleep_until(cluster.now() + 1)
    producer = cluster.producer("p", {"transactional.id": "tx"})
    await producer.init_transactions().wait()
    producer.begin_transaction()
    sent = producer.send("w", 0, 2, name="send")
    while not sink.of_kind("txn.verify"):
        await cluster.clock.sleep_until(cluster.now() + 1)
    return producer, sent


async def test_a_send_is_verified_by_its_leader_and_sent_again_when_the_verification_is_lost(autojump_clock):
    # w-0 on broker 1 alone; the coordinator is broker 0, 5 ms from broker 1; broker 1 waits 1000 ms
    # for the coordinator's answer (request.timeout.ms)
    async with kip890_cluster(**{"request.timeout.ms": 1000}) as (cluster, sink):
        producer, sent = await _send_verified_by_broker_1(cluster, sink)
        (first,) = sink.of_kind("txn.verify")
        start = first["time_ms"]
        assert (first["broker"], first["op"], first["txn"], first["add"]) == (1, "send", "tx", False)
        cluster.network.drop(1, 0, one_way=True)  # the verification (in flight) is lost
        await cluster.clock.sleep_until(start + 500)
        cluster.network.heal(1, 0, one_way=True)
        await sent.wait()
        # lost: NOT_ENOUGH_REPLICAS at start + 1000, sent again 100 ms later, verified in 2 x 5 ms
        assert (sent.errors, sent.completed_ms) == ({"w-0": "NONE"}, start + 1110)
        (retry,) = sink.of_kind("client.txn.retry")
        assert (retry["time_ms"], retry["api"], retry["error"]) == (
            start + 1000,
            "Produce",
            "NOT_ENOUGH_REPLICAS",
        )
        verified = [(e["time_ms"], e["refused"]) for e in sink.of_kind("txn.verified")]
        assert verified == [(start + 1000, {"w-0": "NOT_ENOUGH_REPLICAS"}), (start + 1110, {})]
        assert producer.state == tp_states.IN_TRANSACTION
        log = cluster.brokers[1].replica_manager.partition(TopicPartition("w", 0)).log
        assert (log.high_watermark, log.last_stable_offset) == (2, 0)


async def test_a_crash_ends_a_send_waiting_out_its_retry_backoff_and_it_is_not_sent_again(autojump_clock):
    # as above: the verification is lost, the leader answers NOT_ENOUGH_REPLICAS at start + 1000 and
    # the send would go again at start + 1100 (retry.backoff.ms); the producer dies in between
    async with kip890_cluster(**{"request.timeout.ms": 1000}) as (cluster, sink):
        producer, sent = await _send_verified_by_broker_1(cluster, sink)
        start = sink.of_kind("txn.verify")[0]["time_ms"]
        cluster.network.drop(1, 0, one_way=True)
        await cluster.clock.sleep_until(start + 1050)
        assert [e["time_ms"] for e in sink.of_kind("client.txn.retry")] == [start + 1000]
        producer.crash()
        assert (sent.errors, sent.cause, sent.completed_ms) == (
            {"w-0": "NETWORK_EXCEPTION"},
            "network",
            start + 1050,
        )
        cluster.network.heal(1, 0, one_way=True)
        await cluster.clock.sleep_until(start + 2000)
        assert len(sink.of_kind("txn.verify")) == 1  # nothing sent after the crash


async def test_transaction_version_2_adds_partitions_by_the_produce_and_takes_the_epoch_from_end_txn(
    autojump_clock,
):
    # v-0 led by broker 1 (replicas 1, 2, 0), the coordinator broker 0, 5 ms from broker 1 both ways
    async with kip890_cluster() as (cluster, sink):
        producer = cluster.producer("p", {"transactional.id": "tx", "minibroker.transaction.version": 2})
        assert (await producer.init_transactions().wait()).errors == {"tx": "NONE"}
        pid = producer.producer_id
        for epoch in (0, 1):
            assert producer.epoch == epoch
            producer.begin_transaction()
            start = cluster.now()
            sent = await producer.send("v", 0, 2).wait()
            # no AddPartitionsToTxn from the producer: its leader adds v-0 (5 ms there, the Ongoing
            # write 10 ms: broker 1 is in __transaction_state's ISR, 5 ms back), then the append waits
            # 10 ms for broker 0's fetch of v-0
            assert (sent.errors, sent.completed_ms - start) == ({"v-0": "NONE"}, 30)
            assert _txn(cluster, "tx").state == ONGOING and _txn(cluster, "tx").transaction_version == 2
            ended = await producer.commit_transaction().wait()
            assert ended.errors == {"tx": "NONE"}
            # EndTxn bumped the epoch (PrepareCommit at epoch + 1) and answered it
            assert (producer.producer_id, producer.epoch) == (pid, epoch + 1)
            await _until(cluster, "tx", COMPLETE_COMMIT)
        adds = [(e["broker"], e["add"], e["partitions"]) for e in sink.of_kind("txn.verify")]
        assert adds == [(1, True, ["v-0"]), (1, True, ["v-0"])]
        log = cluster.brokers[1].replica_manager.partition(V0).log
        # 2 records, COMMIT at epoch 1; 2 records of epoch 1 (sequences from 0 again), COMMIT at epoch 2
        assert (log.high_watermark, log.last_stable_offset) == (6, 6)
        assert producer.errors == []


def test_minibroker_transaction_version_is_1_or_2():
    with pytest.raises(
        ConfigError, match=r"minibroker.transaction.version: expected a number from 1 to 2, got 3"
    ):
        ProducerConfig.from_kafka({"minibroker.transaction.version": 3})


@contextlib.asynccontextmanager
async def _spread_cluster():
    """1 ms links; u-0, u-1, u-2 led by brokers 0, 1, 2 (one replica each); __transaction_state-0 on
    all three, led by broker 0 (min.insync.replicas 2: a state write waits for a follower's fetch)."""
    tracer, sink = traced()
    config = {"transaction.state.log.num.partitions": 1, "min.insync.replicas": 2}
    async with open_cluster(3, config=config, tracer=tracer, latency_ms=1) as cluster:
        tracer.clock = cluster.now
        cluster.create_topic(TopicSpec("u", 3, 1))
        cluster.ensure_transaction_state_topic()
        await cluster.clock.sleep_until(cluster.now() + 1)
        yield cluster, sink


def _asked(cluster, broker: int) -> list[tuple[int, object]]:
    """Every request broker ``broker``'s transaction coordinator handles from now on: (ms, request)."""
    coordinator = cluster.brokers[broker].transaction_coordinator
    handle = coordinator.handle
    asked: list[tuple[int, object]] = []

    def recorded(message, respond):
        asked.append((cluster.now(), message))
        handle(message, respond)

    coordinator.handle = recorded
    return asked


async def test_the_partitions_of_the_queued_sends_are_added_in_one_add_partitions_to_txn(autojump_clock):
    async with _spread_cluster() as (cluster, sink):
        asked = _asked(cluster, 0)
        producer = cluster.producer("p", {"transactional.id": "tx"})
        await producer.init_transactions().wait()
        start = cluster.now()
        producer.begin_transaction()
        sends = [producer.send("u", p, 1) for p in (0, 1, 1, 2)]
        await producer.commit_transaction().wait()
        adds = [
            (ms - start, r.partitions, r.verify_only)
            for ms, r in asked
            if type(r).__name__ == "AddPartitionsToTxnRequest"
        ]
        # one AddPartitionsToTxn for the three partitions (1 ms away); then each leader verifies its
        # partition once: broker 1's two sends of u-1 share one verification
        assert adds == [
            (1, (("u", 0), ("u", 1), ("u", 2)), False),
            (6, (("u", 0),), True),
            (6, (("u", 1),), True),
            (6, (("u", 2),), True),
        ]
        ongoing = [
            (e["time_ms"] - start, e["partitions"])
            for e in sink.of_kind("txn.state")
            if e["state"] == ONGOING
        ]
        assert ongoing == [(3, 3)]  # written when the follower's next fetch (2 ms) reports it
        verified = [(e["time_ms"] - start, e["op"]) for e in sink.of_kind("txn.verified")]
        assert verified == [(7, "p#2"), (7, "p#3"), (7, "p#4"), (7, "p#5")]
        # answered at +4, sent, verified at +7 (1 ms each way), appended, answered 1 ms later
        assert [(s.errors, s.completed_ms - start) for s in sends] == [
            ({"u-0": "NONE"}, 8),
            ({"u-1": "NONE"}, 8),
            ({"u-1": "NONE"}, 8),
            ({"u-2": "NONE"}, 8),
        ]


async def test_the_next_transaction_s_first_add_is_retried_after_20_ms_while_markers_complete(autojump_clock):
    async with _spread_cluster() as (cluster, sink):
        producer = cluster.producer("p", {"transactional.id": "tx"})
        assert producer.config.retry_backoff_ms == 100
        await producer.init_transactions().wait()
        producer.begin_transaction()
        await producer.send("u", 0, 1).wait()
        ended = await producer.commit_transaction().wait()
        start = ended.completed_ms  # EndTxn answered after PrepareCommit; the markers are on their way
        producer.begin_transaction()
        sent = await producer.send("u", 0, 1).wait()
        (retry,) = sink.of_kind("client.txn.retry")
        # the AddPartitionsToTxn reaches the coordinator at +1 before CompleteCommit (+3): refused,
        # heard at +2 and sent again 20 ms later (Kafka's producer: the first add of a transaction)
        assert (retry["time_ms"] - start, retry["api"], retry["error"], retry["backoff_ms"]) == (
            2,
            "AddPartitionsToTxn",
            "CONCURRENT_TRANSACTIONS",
            20,
        )
        states = [
            (e["time_ms"] - start, e["state"]) for e in sink.of_kind("txn.state") if e["time_ms"] > start
        ]
        assert states == [(3, COMPLETE_COMMIT), (25, ONGOING)]
        assert (sent.errors, sent.completed_ms - start) == ({"u-0": "NONE"}, 30)


async def test_an_out_of_order_answer_behind_an_earlier_unanswered_send_is_sent_again(autojump_clock):
    async with kip890_cluster() as (cluster, sink):
        producer = cluster.producer("p", {"transactional.id": "tx", "minibroker.transaction.version": 2})
        assert (await producer.init_transactions().wait()).errors == {"tx": "NONE"}
        producer.begin_transaction()
        cluster.drop_link("p", 1)  # both sends stay unanswered
        first, second = producer.send("v", 0, 1), producer.send("v", 0, 1)
        await cluster.clock.sleep_until(cluster.now() + 1)
        out_of_order = ProduceResponse({V0: PartitionProduceResponse(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER)})
        # the leader took sequence 1 before sequence 0 (still unanswered): sent again, as Kafka's
        # producer does; sequence 0 itself refused so has no earlier send to wait for
        assert producer._retry_produce(second, out_of_order)
        assert not producer._retry_produce(first, out_of_order)
        assert [e["op"] for e in sink.of_kind("client.txn.retry")] == [second.id]


async def test_a_send_whose_partition_never_joined_the_transaction_makes_the_commit_fail(autojump_clock):
    async with _cluster() as (cluster, _sink):
        producer = cluster.producer("p", {"transactional.id": "tx", "max.block.ms": 1000})
        assert (await producer.init_transactions().wait()).errors == {"tx": "NONE"}
        producer.begin_transaction()
        start = cluster.now()
        cluster.drop_link("p", 0)  # the coordinator is cut off: AddPartitionsToTxn is never answered
        sent = producer.send("t", 0, 1)
        offsets = producer.send_offsets_to_transaction({T0: 1}, "g")
        ended = await producer.commit_transaction().wait()
        # the send and the offsets ran out of max.block.ms: nothing of them is in the transaction, so it
        # cannot commit (it would commit nothing and report success); only an abort is left
        assert (sent.errors, sent.completed_ms - start) == ({"t-0": "REQUEST_TIMED_OUT"}, 1000)
        assert (offsets.errors, offsets.completed_ms - start) == ({"t-0": "REQUEST_TIMED_OUT"}, 1000)
        assert (ended.errors, ended.completed_ms - start) == ({"tx": "REQUEST_TIMED_OUT"}, 1000)
        assert producer.state == tp_states.ABORTABLE_ERROR
        assert (await producer.abort_transaction().wait()).errors == {"tx": "NONE"}
        assert producer.state == tp_states.READY and _txn(cluster, "tx").state == "Empty"


async def test_after_a_commit_timed_out_only_the_same_commit_may_be_called_again(autojump_clock):
    async with _cluster() as (cluster, _sink):
        producer = cluster.producer("p", {"transactional.id": "tx", "max.block.ms": 1000})
        assert (await producer.init_transactions().wait()).errors == {"tx": "NONE"}
        producer.begin_transaction()
        assert (await producer.send("t", 0, 1).wait()).errors == {"t-0": "NONE"}
        cluster.set_latency("p", 0, 600)  # the EndTxn's answer comes back after max.block.ms
        start = cluster.now()
        ended = await producer.commit_transaction().wait()
        # the coordinator committed at once; the producer gave up waiting and stays committing
        assert (ended.errors, ended.completed_ms - start) == ({"tx": "REQUEST_TIMED_OUT"}, 1000)
        assert producer.state == tp_states.COMMITTING and _txn(cluster, "tx").state == COMPLETE_COMMIT
        cluster.set_latency("p", 0, 1)
        # a send would join the transaction being committed: it fails, as begin and abort do
        late = producer.send("t", 0, 1)
        producer.begin_transaction()
        aborted = producer.abort_transaction()
        again = await producer.commit_transaction().wait()
        assert (late.errors, aborted.errors) == ({"t-0": "INVALID_TXN_STATE"}, {"tx": "INVALID_TXN_STATE"})
        # the same commit again: answered NONE behind the first answer still on the link (at 1 200)
        assert (again.errors, again.completed_ms - start) == ({"tx": "NONE"}, 1200)
        assert producer.state == tp_states.READY
        assert [error for _, api, error in producer.errors if api == "BeginTransaction"] == [
            "INVALID_TXN_STATE"
        ]
        assert _log(cluster).log_end_offset == 2  # the record and the COMMIT marker: nothing late
