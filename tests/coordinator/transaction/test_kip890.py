"""KIP-890 in virtual time: partition verification against KIP-664's hanging transaction (also from a
coordinator's state loaded from above its HW), and transaction protocol version 2 (an epoch bump at
every EndTxn, partitions added by the produce)."""

from __future__ import annotations

import contextlib

from minibroker.common.errors import Errors
from minibroker.common.messages import ADD_PARTITION, ProduceData, ProduceRequest, TopicPartition
from minibroker.common.record_batch import ProducerBatch
from minibroker.coordinator.transaction import TRANSACTION_STATE_TOPIC
from minibroker.coordinator.transaction import messages as m
from minibroker.coordinator.transaction.transaction_metadata import COMPLETE_ABORT, COMPLETE_COMMIT, ONGOING
from minibroker.sim import TopicSpec, open_cluster
from tests.coordinator.group.helpers import Raw, traced

V0 = TopicPartition("v", 0)
CONFIG = {
    "transaction.state.log.num.partitions": 1,
    "min.insync.replicas": 2,
}
#: one way between v-0's leader (1) and the transaction coordinator (0)
LATENCY = 5


def _records(txn: str | None, pid: int, epoch: int, seq: int, operation: int = 0) -> ProduceRequest:
    producers = (ProducerBatch(pid, epoch, seq, seq, 0, 0, True),)
    data = ProduceData(1, 10, values=(b"v",), producers=producers)
    return ProduceRequest(-1, 30_000, {V0: data}, f"records-{pid}-{epoch}-{seq}", txn, operation)


@contextlib.asynccontextmanager
async def _cluster(**settings):
    tracer, sink = traced()
    async with open_cluster(3, config={**CONFIG, **settings}, tracer=tracer) as cluster:
        tracer.clock = cluster.now
        cluster.create_topic(TopicSpec("v", 1, 3, assignment=((1, 2, 0),)))
        cluster.ensure_transaction_state_topic()
        await cluster.clock.sleep_until(cluster.now() + 1)
        assert cluster.leader_of(V0) == 1
        cluster.network.set_latency(1, 0, LATENCY)
        yield cluster, sink


async def _producer_id(raw, txn: str, timeout_ms: int = 60_000) -> int:
    return (await raw.call(0, m.InitProducerIdRequest(txn, timeout_ms))).producer_id


async def _until(cluster, meta, state: str) -> None:
    while meta.state != state:
        await cluster.clock.sleep_until(cluster.now() + 1)


async def _aborted_then_late_write(cluster, raw) -> tuple[int, ProduceRequest]:
    """A transaction writes v-0 and aborts; a retry of its write (same epoch, a later sequence)
    arrives only after the ABORT marker. Returns the producer id and that late write."""
    pid = await _producer_id(raw, "late")
    assert (await raw.call(0, m.AddPartitionsToTxnRequest("late", pid, 0, (("v", 0),)))).error is Errors.NONE
    assert (await raw.call(1, _records("late", pid, 0, 0))).partitions[V0].error is Errors.NONE
    assert (await raw.call(0, m.EndTxnRequest("late", pid, 0, False))).error is Errors.NONE
    await _until(cluster, cluster.brokers[0].transaction_coordinator.transactions["late"], COMPLETE_ABORT)
    return pid, _records("late", pid, 0, 1)


async def test_without_verification_a_late_write_hangs_the_lso_past_the_transaction_timeout(autojump_clock):
    async with _cluster(**{"transaction.partition.verification.enable": False}) as (cluster, sink):
        raw = Raw(cluster, "client")
        pid, late = await _aborted_then_late_write(cluster, raw)
        log = cluster.brokers[1].replica_manager.partition(V0).log
        assert (log.high_watermark, log.last_stable_offset) == (2, 2)  # the record and its ABORT marker
        assert (await raw.call(1, late)).partitions[V0].error is Errors.NONE
        # offset 2 opened a transaction the coordinator does not know (it is CompleteAbort): no marker
        # and no timeout will close it, so the LSO stays at 2 for good (KIP-664's hanging transaction)
        await cluster.clock.sleep_until(cluster.now() + 120_000)
        assert (log.high_watermark, log.last_stable_offset, log.producer_state.ongoing) == (3, 2, {pid: 2})
        assert sink.of_kind("txn.verify") == [] and sink.of_kind("txn.timeout") == []


async def test_verification_refuses_the_late_write_with_invalid_txn_state_after_one_round_trip(
    autojump_clock,
):
    async with _cluster() as (cluster, sink):
        raw = Raw(cluster, "client")
        _, late = await _aborted_then_late_write(cluster, raw)
        log = cluster.brokers[1].replica_manager.partition(V0).log
        sent = cluster.now()
        answer = raw.send(1, late)
        await cluster.clock.sleep_until(sent + 100)
        # the leader asked the coordinator (0) and had its answer one round trip later
        assert answer.response.partitions[V0].error is Errors.INVALID_TXN_STATE
        assert answer.at == sent + 2 * LATENCY
        assert (log.log_end_offset, log.last_stable_offset, log.producer_state.ongoing) == (2, 2, {})
        first, late_verify = [e for e in sink.of_kind("txn.verify") if e["txn"] == "late"]
        (_, verified) = [e for e in sink.of_kind("txn.verified") if e["txn"] == "late"]
        assert (late_verify["time_ms"], late_verify["coordinator"], late_verify["add"]) == (sent, 0, False)
        assert (verified["time_ms"], verified["refused"]) == (
            sent + 2 * LATENCY,
            {"v-0": "INVALID_TXN_STATE"},
        )
        assert first["partitions"] == ["v-0"]  # the transaction's own first write was verified too


async def test_a_verified_transaction_verifies_only_its_first_write_on_a_partition(autojump_clock):
    async with _cluster() as (cluster, sink):
        raw = Raw(cluster, "client")
        pid = await _producer_id(raw, "once")
        # not added yet: the leader is told TRANSACTION_ABORTABLE, INVALID_TXN_STATE for a Produce <= v10
        refused = await raw.call(1, _records("once", pid, 0, 0))
        assert refused.partitions[V0].error is Errors.INVALID_TXN_STATE
        assert (
            await raw.call(0, m.AddPartitionsToTxnRequest("once", pid, 0, (("v", 0),)))
        ).error is Errors.NONE
        for seq in range(3):
            assert (await raw.call(1, _records("once", pid, 0, seq))).partitions[V0].error is Errors.NONE
        assert len([e for e in sink.of_kind("txn.verify") if e["txn"] == "once"]) == 2
        # a write with an older epoch is fenced by the coordinator: INVALID_PRODUCER_EPOCH
        assert (
            await raw.call(0, m.InitProducerIdRequest("once", 60_000))
        ).error is Errors.CONCURRENT_TRANSACTIONS
        await _until(cluster, cluster.brokers[0].transaction_coordinator.transactions["once"], COMPLETE_ABORT)
        stale = await raw.call(1, _records("once", pid, 0, 3))
        assert stale.partitions[V0].error is Errors.INVALID_PRODUCER_EPOCH


async def test_transaction_version_2_bumps_the_epoch_at_every_end_and_the_produce_adds_the_partition(
    autojump_clock,
):
    async with _cluster() as (cluster, sink):
        raw = Raw(cluster, "client")
        coordinator = cluster.brokers[0].transaction_coordinator
        pid = await _producer_id(raw, "tv2")
        log = cluster.brokers[1].replica_manager.partition(V0).log
        for epoch, commit in enumerate((True, False, True)):
            # no AddPartitionsToTxn: a Produce v12+ has the leader add v-0 to the transaction
            written = await raw.call(1, _records("tv2", pid, epoch, 0, ADD_PARTITION))
            assert written.partitions[V0].error is Errors.NONE
            meta = coordinator.transactions["tv2"]
            assert (meta.state, meta.partitions) == (ONGOING, {("v", 0)})
            ended = await raw.call(0, m.EndTxnRequest("tv2", pid, epoch, commit, transaction_version=2))
            assert (ended.error, ended.producer_id, ended.producer_epoch) == (Errors.NONE, pid, epoch + 1)
            await _until(cluster, meta, COMPLETE_COMMIT if commit else COMPLETE_ABORT)
            # the marker carries the bumped epoch: the partition knows the producer at epoch + 1
            assert log.producer_state.entries[pid].epoch == epoch + 1
            # a retry of that EndTxn (the epoch before the bump) gets the same answer
            again = await raw.call(0, m.EndTxnRequest("tv2", pid, epoch, commit, transaction_version=2))
            assert (again.error, again.producer_epoch) == (Errors.NONE, epoch + 1)
        assert (log.log_end_offset, log.last_stable_offset) == (6, 6)
        # a late write of the first epoch is fenced at the partition
        late = await raw.call(1, _records("tv2", pid, 0, 1, ADD_PARTITION))
        assert late.partitions[V0].error is Errors.INVALID_PRODUCER_EPOCH
        assert log.log_end_offset == 6
        states = [e["state"] for e in sink.of_kind("txn.state") if e["txn"] == "tv2"]
        commit, abort = (
            ["Ongoing", "PrepareCommit", "CompleteCommit"],
            ["Ongoing", "PrepareAbort", "CompleteAbort"],
        )
        assert states == ["Empty", *commit, *abort, *commit]
        assert [e["fenced"] for e in sink.of_kind("txn.end") if e["txn"] == "tv2"] == [False] * 3


async def test_a_version_2_transaction_aborted_by_its_timeout_takes_the_client_s_abort_as_a_retry(
    autojump_clock,
):
    async with _cluster() as (cluster, sink):
        raw = Raw(cluster, "client")
        coordinator = cluster.brokers[0].transaction_coordinator
        pid = await _producer_id(raw, "slow2", 25_000)
        written = await raw.call(1, _records("slow2", pid, 0, 0, ADD_PARTITION))
        assert written.partitions[V0].error is Errors.NONE
        meta = coordinator.transactions["slow2"]
        assert (meta.state, meta.transaction_version) == (ONGOING, 2)  # the produce added v-0 for version 2
        started = meta.start_ms
        (loaded,) = [e for e in sink.of_kind("txn.load") if e["broker"] == 0]
        await _until(cluster, meta, COMPLETE_ABORT)
        (timeout,) = [e for e in sink.of_kind("txn.timeout") if e["txn"] == "slow2"]
        # the first 10 s check strictly after start + 25 000 aborts it, bumping the epoch
        due = next(t for t in range(loaded["time_ms"], 10**6, 10_000) if t > started + 25_000)
        assert (timeout["started"], timeout["time_ms"]) == (started, due)
        assert meta.producer_epoch == 1
        # the client, still at epoch 0, aborts: the coordinator takes it as the retry of the bumping end
        aborted = await raw.call(0, m.EndTxnRequest("slow2", pid, 0, False, transaction_version=2))
        assert (aborted.error, aborted.producer_epoch) == (Errors.NONE, 1)
        committed = await raw.call(0, m.EndTxnRequest("slow2", pid, 0, True, transaction_version=2))
        assert committed.error is Errors.INVALID_TXN_STATE


TS0 = TopicPartition(TRANSACTION_STATE_TOPIC, 0)


async def _ongoing_above_the_hw(cluster, raw) -> dict:
    """Broker 1 takes over ``__transaction_state-0`` at 1 100 with "u"'s Ongoing record (offset 1) above
    its HW; at 1 200 a verification, a client's AddPartitionsToTxn for v-0 (already in the transaction)
    and a Produce to v-0's leader (1, which verifies with itself) are sent; their answers still to come."""
    pid = await _producer_id(raw, "u")  # Empty at offset 0, committed at 11
    cluster.pause_fetcher(2)  # 2 stays in the ISR (30 s lag allowed) but fetches nothing
    await cluster.clock.sleep_until(1_000)
    raw.send(0, m.AddPartitionsToTxnRequest("u", pid, 0, (("v", 0),)))  # Ongoing at 1: 0 and 1 have it
    await cluster.clock.sleep_until(1_100)
    cluster.move_leader(TS0, 1)  # 1 reads 2 records (to its log end) at 1 ms each, serving at 1 102
    await cluster.clock.sleep_until(1_200)
    coordinator = cluster.brokers[1].transaction_coordinator
    assert (coordinator.transactions["u"].state, coordinator.uncommitted) == (ONGOING, {"u": 1})
    assert cluster.brokers[1].replica_manager.partition(TS0).log.high_watermark == 1
    answers = {
        "verify": raw.send(1, m.AddPartitionsToTxnRequest("u", pid, 0, (("v", 0),), verify_only=True)),
        "add": raw.send(1, m.AddPartitionsToTxnRequest("u", pid, 0, (("v", 0),))),
        "produce": raw.send(1, _records("u", pid, 0, 0)),
    }
    await cluster.clock.sleep_until(1_300)
    assert [answer.response for answer in answers.values()] == [None] * 3
    return answers


async def test_a_verification_from_a_loaded_uncommitted_ongoing_record_waits_for_the_hw(autojump_clock):
    async with _cluster() as (cluster, sink):
        raw = Raw(cluster, "client")
        answers = await _ongoing_above_the_hw(cluster, raw)
        cluster.resume_fetcher(2)  # 2 fetches offset 1 from 1 at once; 0 must report offset 2 as well
        await cluster.clock.sleep_until(2_000)
        # 0 follows 1 since 1 100 and reports its log end with its next fetch: the one parked at 1 from
        # 1 020 expires at 1 520 (replica.fetch.wait.max.ms 500), reaches 0 at 1 525, and 0's next fetch
        # reaches 1 at 1 530. The HW passes offset 1 then, and the answers come that instant (the client's
        # links have no latency): the partition is in the transaction
        (hw,) = [e for e in sink.of_kind("hw") if e["partition"] == str(TS0) and e["broker"] == 1]
        assert (hw["time_ms"], hw["hw"]) == (1_530, 2)
        verify, add = answers["verify"], answers["add"]
        assert (verify.at, verify.response.error, verify.response.partition_errors) == (
            1_530,
            Errors.NONE,
            ((("v", 0), Errors.NONE),),
        )
        assert (add.at, add.response.error) == (1_530, Errors.NONE)
        waits = [(e["time_ms"], e["txn"], e["offset"], e["hw"]) for e in sink.of_kind("txn.wait")]
        assert waits == [(1_200, "u", 1, 1)] * 3
        # the Produce appended v-0's record at 1 530, acknowledged when 0 has it (5 ms each way)
        produce = answers["produce"]
        assert (produce.at, produce.response.partitions[V0].error) == (1_540, Errors.NONE)
        assert cluster.brokers[1].transaction_coordinator.uncommitted == {}


async def test_a_waiting_verification_answers_not_coordinator_when_the_partition_moves_away(autojump_clock):
    async with _cluster() as (cluster, sink):
        raw = Raw(cluster, "client")
        answers = await _ongoing_above_the_hw(cluster, raw)
        cluster.move_leader(TS0, 0)  # at 1 300, before the HW passed offset 1
        await cluster.clock.sleep_until(2_000)
        verify, add, produce = answers["verify"], answers["add"], answers["produce"]
        assert (verify.at, verify.response.error) == (1_300, Errors.NOT_COORDINATOR)
        assert (add.at, add.response.error) == (1_300, Errors.NOT_COORDINATOR)
        # the leader tells the producer to retry, and appended nothing: no transaction without its state
        assert (produce.at, produce.response.partitions[V0].error) == (1_300, Errors.NOT_ENOUGH_REPLICAS)
        log = cluster.brokers[1].replica_manager.partition(V0).log
        assert (log.log_end_offset, log.producer_state.ongoing) == (0, {})
        assert len(sink.of_kind("txn.wait")) == 3
        assert cluster.brokers[1].transaction_coordinator.uncommitted == {}


async def test_a_loaded_prepare_commit_above_the_hw_sends_its_markers_when_the_hw_passes_it(autojump_clock):
    async with _cluster() as (cluster, sink):
        raw = Raw(cluster, "client")
        pid = await _producer_id(raw, "c")
        assert (await raw.call(0, m.AddPartitionsToTxnRequest("c", pid, 0, (("v", 0),)))).error is Errors.NONE
        assert (await raw.call(1, _records("c", pid, 0, 0))).partitions[V0].error is Errors.NONE
        cluster.pause_fetcher(2)
        await cluster.clock.sleep_until(1_000)
        raw.send(0, m.EndTxnRequest("c", pid, 0, True))  # PrepareCommit at offset 2: 0 and 1 have it
        await cluster.clock.sleep_until(1_100)
        cluster.move_leader(TS0, 1)  # 1 reads 3 records at 1 ms each: PrepareCommit, above its HW (2)
        await cluster.clock.sleep_until(1_200)
        cluster.resume_fetcher(2)
        await cluster.clock.sleep_until(1_570)
        log = cluster.brokers[1].replica_manager.partition(V0).log
        assert (log.log_end_offset, log.producer_state.ongoing) == (1, {pid: 0})  # no marker yet
        await cluster.clock.sleep_until(2_000)
        # 0's fetch parked at 1 since 1 061 expires at 1 561, reaches 0 at 1 566, and 0's next fetch, the
        # first to report __transaction_state-0's end, reaches 1 at 1 571: the HW passes offset 2 and the
        # COMMIT marker goes to v-0's leader (1 itself) then, not at the load (1 103)
        waits = [(e["time_ms"], e["txn"], e["offset"], e["hw"]) for e in sink.of_kind("txn.wait")]
        assert waits == [(1_103, "c", 2, 2)]
        (hw,) = [e for e in sink.of_kind("hw") if e["partition"] == str(TS0) and e["hw"] == 3]
        (markers,) = [e for e in sink.of_kind("txn.markers") if e["txn"] == "c"]
        assert (hw["broker"], hw["time_ms"], markers["broker"], markers["time_ms"]) == (1, 1_571, 1, 1_571)
        meta = cluster.brokers[1].transaction_coordinator.transactions["c"]
        assert meta.state == COMPLETE_COMMIT
        assert (log.log_end_offset, log.producer_state.ongoing) == (2, {})


async def test_a_version_2_add_refused_concurrent_transactions_is_asked_again_and_a_later_sequence_waits(
    autojump_clock,
):
    async with _cluster() as (cluster, sink):
        raw = Raw(cluster, "client")
        pid = await _producer_id(raw, "two")
        await cluster.clock.sleep_until(100)
        # sequence 1 reaches v-0's leader (1) before sequence 0; both have it add v-0 (5 ms each way)
        later = raw.send(1, _records("two", pid, 0, 1, ADD_PARTITION))
        first = raw.send(1, _records("two", pid, 0, 0, ADD_PARTITION))
        await cluster.clock.sleep_until(300)
        # at 105 the coordinator writes the first add (Ongoing once its HW passes it, 115) and refuses
        # the second CONCURRENT_TRANSACTIONS (back at 110): the leader asks again 20 ms later, at 130
        asks = [(e["time_ms"], e["op"][-1]) for e in sink.of_kind("txn.verify") if e["txn"] == "two"]
        assert asks == [(100, "1"), (100, "0"), (130, "0")]
        # sequence 1, verified at 120 while sequence 0 is still being verified, may not open the
        # transaction: OUT_OF_ORDER_SEQUENCE_NUMBER; sequence 0 appends at 140, acknowledged at 150
        assert (later.at, later.response.partitions[V0].error) == (120, Errors.OUT_OF_ORDER_SEQUENCE_NUMBER)
        assert (first.at, first.response.partitions[V0].error) == (150, Errors.NONE)
        again = await raw.call(1, _records("two", pid, 0, 1, ADD_PARTITION))
        assert (again.partitions[V0].error, again.partitions[V0].base_offset) == (Errors.NONE, 1)


async def test_a_version_2_add_still_refused_after_the_retry_window_reaches_the_client(autojump_clock):
    async with _cluster(**{"add.partitions.to.txn.retry.backoff.max.ms": 0}) as (cluster, sink):
        raw = Raw(cluster, "client")
        pid = await _producer_id(raw, "two")
        await cluster.clock.sleep_until(100)
        raw.send(1, _records("two", pid, 0, 0, ADD_PARTITION))
        second = raw.send(1, _records("two", pid, 0, 1, ADD_PARTITION))
        await cluster.clock.sleep_until(300)
        # no retry window: CONCURRENT_TRANSACTIONS becomes NOT_ENOUGH_REPLICAS, which clients retry
        assert (second.at, second.response.partitions[V0].error) == (110, Errors.NOT_ENOUGH_REPLICAS)
        assert len(sink.of_kind("txn.verify")) == 2


async def test_verifications_asked_together_share_one_request_and_each_is_traced(autojump_clock):
    async with _cluster() as (cluster, sink):
        raw = Raw(cluster, "client")
        pid = await _producer_id(raw, "pair")
        added = await raw.call(0, m.AddPartitionsToTxnRequest("pair", pid, 0, (("v", 0),)))
        assert added.error is Errors.NONE
        asked = []
        request = cluster.network.request

        def counting(src, dst, message, *rest):
            if isinstance(message, m.AddPartitionsToTxnRequest):
                asked.append((src, message.verify_only))
            return request(src, dst, message, *rest)

        cluster.network.request = counting
        first, second = raw.send(1, _records("pair", pid, 0, 0)), raw.send(1, _records("pair", pid, 0, 1))
        await cluster.clock.sleep_until(cluster.now() + 100)
        assert [r.response.partitions[V0].error for r in (first, second)] == [Errors.NONE, Errors.NONE]
        assert asked == [(1, True)]  # v-0's leader asked the coordinator once for both
        verifies = [e["op"] for e in sink.of_kind("txn.verify") if e["txn"] == "pair"]
        assert verifies == ["records-1000000-0-0", "records-1000000-0-1"]
        assert len(sink.of_kind("txn.verified")) == 2
