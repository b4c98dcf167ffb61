"""The transaction coordinator in virtual time: its states, markers, the LSO and the timeout abort."""

from __future__ import annotations

import contextlib
import json

import attrs

from minibroker.broker.producer_state import AbortedTxn
from minibroker.common.errors import Errors
from minibroker.common.messages import (
    HIGH_WATERMARK,
    TXN_COMMITTED,
    FetchPartition,
    FetchRequest,
    ProduceData,
    ProduceRequest,
    TopicPartition,
)
from minibroker.common.record_batch import ProducerBatch
from minibroker.coordinator.group import OFFSETS_TOPIC
from minibroker.coordinator.group import messages as groups
from minibroker.coordinator.transaction import TRANSACTION_STATE_TOPIC
from minibroker.coordinator.transaction import messages as m
from minibroker.coordinator.transaction.transaction_coordinator import marker_data
from minibroker.coordinator.transaction.transaction_metadata import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    EMPTY,
    ONGOING,
    PREPARE_ABORT,
    TransactionMetadata,
)
from minibroker.sim import TopicSpec, open_cluster
from tests.coordinator.group.helpers import Raw, traced

T0 = TopicPartition("t", 0)
CONFIG = {
    "transaction.state.log.num.partitions": 1,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 10_000,
    "min.insync.replicas": 2,
}


def _records(pid: int, epoch: int, seq: int, count: int = 1) -> ProduceRequest:
    producers = (ProducerBatch(pid, epoch, seq, seq + count - 1, 0, count - 1, True),)
    data = ProduceData(count, 10 * count, values=tuple(b"v" for _ in range(count)), producers=producers)
    return ProduceRequest(-1, 30_000, {T0: data}, f"records-{pid}-{seq}")


@contextlib.asynccontextmanager
async def _cluster(**settings: int):
    tracer, sink = traced()
    async with open_cluster(3, config={**CONFIG, **settings}, tracer=tracer) as cluster:
        tracer.clock = cluster.now
        cluster.create_topic(TopicSpec("t", 1, 3))
        cluster.ensure_transaction_state_topic()
        await cluster.clock.sleep_until(cluster.now() + 1)  # the leaders take over
        yield cluster, sink


async def _open_on_t0(raw, txn: str) -> int:
    """A transaction of ``txn`` (coordinated by broker 0) with one record on t-0; its producer id."""
    pid = (await raw.call(0, m.InitProducerIdRequest(txn, 60_000))).producer_id
    assert (await raw.call(0, m.AddPartitionsToTxnRequest(txn, pid, 0, (("t", 0),)))).error is Errors.NONE
    assert (await raw.call(0, _records(pid, 0, 0))).partitions[T0].error is Errors.NONE
    return pid


def _leader_log(cluster, tp: TopicPartition):
    return cluster.brokers[cluster.leader_of(tp)].replica_manager.partition(tp).log


async def test_commit_and_abort_move_the_lso_and_fill_the_aborted_index(autojump_clock):
    async with _cluster() as (cluster, sink):
        raw = Raw(cluster, "client")
        assert cluster.leader_of(TopicPartition(TRANSACTION_STATE_TOPIC, 0)) == 0
        init = await raw.call(0, m.InitProducerIdRequest("tx", 60_000))
        assert (init.error, init.producer_epoch) == (Errors.NONE, 0)
        pid = init.producer_id
        log = _leader_log(cluster, T0)
        added = await raw.call(0, m.AddPartitionsToTxnRequest("tx", pid, 0, (("t", 0),)))
        assert added.error is Errors.NONE
        assert (await raw.call(0, _records(pid, 0, 0, 3))).partitions[T0].error is Errors.NONE
        # offsets 0-2 are replicated (HW 3) but belong to an open transaction: the LSO stays at 0
        assert (log.high_watermark, log.last_stable_offset) == (3, 0)
        coordinator = cluster.brokers[0].transaction_coordinator
        assert coordinator.transactions["tx"].state == ONGOING
        assert (await raw.call(0, m.EndTxnRequest("tx", pid, 0, False))).error is Errors.NONE
        while coordinator.transactions["tx"].state != COMPLETE_ABORT:
            await cluster.clock.sleep_until(cluster.now() + 1)
        # the ABORT marker is offset 3: the LSO passes it, the index holds offsets 0..3
        assert (log.high_watermark, log.last_stable_offset) == (4, 4)
        assert log.producer_state.aborted == [AbortedTxn(pid, 0, 3)]
        assert (
            await raw.call(0, m.AddPartitionsToTxnRequest("tx", pid, 0, (("t", 0),)))
        ).error is Errors.NONE
        assert (await raw.call(0, _records(pid, 0, 3))).partitions[T0].error is Errors.NONE
        assert (log.high_watermark, log.last_stable_offset) == (5, 4)
        assert (await raw.call(0, m.EndTxnRequest("tx", pid, 0, True))).error is Errors.NONE
        while coordinator.transactions["tx"].state != COMPLETE_COMMIT:
            await cluster.clock.sleep_until(cluster.now() + 1)
        assert (log.high_watermark, log.last_stable_offset) == (6, 6)
        assert log.producer_state.aborted == [AbortedTxn(pid, 0, 3)]  # a commit adds nothing
        # every follower holds the same transactions (they replay the markers they replicate)
        for broker in cluster.brokers:
            replica = broker.replica_manager.partition(T0).log
            assert (replica.producer_state.ongoing, replica.producer_state.aborted) == (
                {},
                [AbortedTxn(pid, 0, 3)],
            )
        states = [e["state"] for e in sink.of_kind("txn.state")]
        assert states == [
            "Empty",
            "Ongoing",
            "PrepareAbort",
            "CompleteAbort",
            "Ongoing",
            "PrepareCommit",
            "CompleteCommit",
        ]


async def test_the_timeout_aborts_an_open_transaction_with_an_epoch_bump_at_the_first_check_after_it(
    autojump_clock,
):
    async with _cluster() as (cluster, sink):
        raw = Raw(cluster, "client")
        (loaded,) = [e for e in sink.of_kind("txn.load") if e["broker"] == 0]
        armed = loaded["time_ms"]  # the cleanup task runs every 10 s from the first leadership
        init = await raw.call(0, m.InitProducerIdRequest("slow", 25_000))
        pid = init.producer_id
        assert (
            await raw.call(0, m.AddPartitionsToTxnRequest("slow", pid, 0, (("t", 0),)))
        ).error is Errors.NONE
        started = cluster.brokers[0].transaction_coordinator.transactions["slow"].start_ms
        assert (await raw.call(0, _records(pid, 0, 0))).partitions[T0].error is Errors.NONE
        log = _leader_log(cluster, T0)
        # due once start + 25 000 < now: the first check strictly after that instant aborts it
        checks = [armed + 10_000 * k for k in range(1, 10)]
        due = next(t for t in checks if started + 25_000 < t)
        assert (armed, started, due) == (0, 1, 30_000)
        await cluster.clock.sleep_until(due - 1)
        assert log.last_stable_offset == 0
        await cluster.clock.sleep_until(due + 1)  # (trio does not order tasks woken at one instant)
        (timeout,) = [e for e in sink.of_kind("txn.timeout")]
        assert (timeout["time_ms"], timeout["txn"], timeout["started"]) == (due, "slow", started)
        await cluster.clock.sleep_until(cluster.now() + 100)
        meta = cluster.brokers[0].transaction_coordinator.transactions["slow"]
        assert (meta.state, meta.producer_epoch) == (COMPLETE_ABORT, 1)
        assert (log.last_stable_offset, log.producer_state.aborted) == (2, [AbortedTxn(pid, 0, 1)])
        # the producer of epoch 0 is fenced: its EndTxn and its writes meet epoch 1
        assert (await raw.call(0, m.EndTxnRequest("slow", pid, 0, True))).error is Errors.PRODUCER_FENCED
        late = await raw.call(0, _records(pid, 0, 1))
        assert late.partitions[T0].error is Errors.INVALID_PRODUCER_EPOCH


async def test_a_new_coordinator_reloads_the_state_and_finishes_the_markers(autojump_clock):
    async with _cluster() as (cluster, sink):
        raw = Raw(cluster, "client")
        pid = await _open_on_t0(raw, "moving")
        cluster.crash(0)
        await cluster.clock.sleep_until(cluster.now() + 1_000)
        new = cluster.leader_of(TopicPartition(TRANSACTION_STATE_TOPIC, 0))
        assert new in (1, 2)
        # the new coordinator read the partition's 2 records (Empty, Ongoing) at 1 ms each
        (start,) = [e for e in sink.of_kind("txn.load.start") if e["broker"] == new]
        (load,) = [e for e in sink.of_kind("txn.load") if e["broker"] == new]
        assert (start["records"], load["time_ms"] - start["time_ms"], load["transactions"]) == (2, 2, 1)
        meta = cluster.brokers[new].transaction_coordinator.transactions["moving"]
        assert (meta.producer_id, meta.producer_epoch, meta.state) == (pid, 0, ONGOING)
        assert (await raw.call(new, m.EndTxnRequest("moving", pid, 0, True))).error is Errors.NONE
        while meta.state != COMPLETE_COMMIT:
            await cluster.clock.sleep_until(cluster.now() + 1)
        log = _leader_log(cluster, T0)
        assert (log.last_stable_offset, log.producer_state.ongoing) == (log.high_watermark, {})


async def test_a_marker_waits_for_a_leader_retrying_every_100_ms(autojump_clock):
    async with _cluster() as (cluster, sink):
        cluster.create_topic(TopicSpec("w", 1, 1, assignment=((1,),)))  # one replica: offline while 1 is down
        await cluster.clock.sleep_until(cluster.now() + 1)
        w0 = TopicPartition("w", 0)
        raw = Raw(cluster, "client")
        pid = (await raw.call(0, m.InitProducerIdRequest("retry", 60_000))).producer_id
        assert (
            await raw.call(0, m.AddPartitionsToTxnRequest("retry", pid, 0, (("w", 0),)))
        ).error is Errors.NONE
        records = ProduceRequest(-1, 30_000, {w0: _records(pid, 0, 0).data[T0]}, "records-w")
        assert (await raw.call(1, records)).partitions[w0].error is Errors.NONE
        cluster.crash(1)
        ended = cluster.now()
        assert (await raw.call(0, m.EndTxnRequest("retry", pid, 0, True))).error is Errors.NONE
        await cluster.clock.sleep_until(ended + 250)
        await cluster.restart(1)
        restarted = cluster.now()
        meta = cluster.brokers[0].transaction_coordinator.transactions["retry"]
        while meta.state != COMPLETE_COMMIT:
            await cluster.clock.sleep_until(cluster.now() + 1)
        sends = [e["time_ms"] - ended for e in sink.of_kind("txn.markers") if e["txn"] == "retry"]
        # w-0 has no leader from the crash until the restart at 250: the coordinator looks again every
        # 100 ms (at 100, 200, 300) and sends the marker at the first look after the restart
        assert (restarted - ended, sends) == (250, [300])
        (complete,) = [
            e for e in sink.of_kind("txn.state") if e["txn"] == "retry" and e["state"] == COMPLETE_COMMIT
        ]
        assert complete["time_ms"] - ended == 300
        log = cluster.brokers[1].replica_manager.partition(w0).log
        assert (log.last_stable_offset, log.high_watermark, log.producer_state.ongoing) == (2, 2, {})


async def test_a_read_committed_delayed_fetch_waits_for_the_lso_not_the_hw(autojump_clock):
    async with _cluster() as (cluster, _):
        raw = Raw(cluster, "client")
        pid = (await raw.call(0, m.InitProducerIdRequest("held", 60_000))).producer_id
        assert (
            await raw.call(0, m.AddPartitionsToTxnRequest("held", pid, 0, (("t", 0),)))
        ).error is Errors.NONE
        assert (await raw.call(0, _records(pid, 0, 0, 3))).partitions[T0].error is Errors.NONE
        wanted = {T0: FetchPartition(0, 1_048_576)}
        start = cluster.now()
        # READ_UNCOMMITTED: the three records are below the HW, answered at once
        uncommitted = raw.send(0, FetchRequest(-1, 5_000, 1, 1_048_576, wanted, HIGH_WATERMARK, "ru"))
        # READ_COMMITTED: below the LSO (0) there is nothing; the DelayedFetch waits
        committed = raw.send(0, FetchRequest(-1, 5_000, 1, 1_048_576, wanted, TXN_COMMITTED, "rc"))
        await cluster.clock.sleep_until(start + 1_000)
        assert uncommitted.at == start and [b.count for b in uncommitted.response.partitions[T0].batches] == [
            3
        ]
        assert committed.response is None
        assert (await raw.call(0, m.EndTxnRequest("held", pid, 0, True))).error is Errors.NONE
        meta = cluster.brokers[0].transaction_coordinator.transactions["held"]
        while meta.state != COMPLETE_COMMIT:
            await cluster.clock.sleep_until(cluster.now() + 1)
        # the COMMIT marker moved the LSO past the records: the parked fetch completed then, not at 5 000
        assert committed.at == start + 1_000
        assert committed.response.cause != "expired"
        # the marker (offset 3) closed the transaction when appended, below the HW: the LSO is the HW, 3
        assert [b.count for b in committed.response.partitions[T0].batches] == [3]


async def test_a_loading_coordinator_answers_coordinator_load_in_progress_until_read(autojump_clock):
    async with _cluster(**{"minibroker.coordinator.load.ms.per.record": 500}) as (cluster, sink):
        raw = Raw(cluster, "client")
        pid = (await raw.call(0, m.InitProducerIdRequest("loading", 60_000))).producer_id
        assert (
            await raw.call(0, m.AddPartitionsToTxnRequest("loading", pid, 0, (("t", 0),)))
        ).error is Errors.NONE
        cluster.crash(0)
        await cluster.clock.sleep_until(cluster.now() + 1)
        new = cluster.leader_of(TopicPartition(TRANSACTION_STATE_TOPIC, 0))
        (start,) = [e for e in sink.of_kind("txn.load.start") if e["broker"] == new]
        assert (start["records"], start["load_ms"]) == (2, 1_000)
        await cluster.clock.sleep_until(start["time_ms"] + 999)
        refused = await raw.call(new, m.EndTxnRequest("loading", pid, 0, False))
        assert refused.error is Errors.COORDINATOR_LOAD_IN_PROGRESS
        await cluster.clock.sleep_until(start["time_ms"] + 1_000)
        await cluster.clock.sleep_until(cluster.now() + 1)
        assert (await raw.call(new, m.EndTxnRequest("loading", pid, 0, False))).error is Errors.NONE


async def test_an_idle_transactional_id_expires_at_the_first_check_after_its_expiration(autojump_clock):
    settings = {
        "transactional.id.expiration.ms": 60_000,
        "transaction.remove.expired.transaction.cleanup.interval.ms": 10_000,
    }
    async with _cluster(**settings) as (cluster, sink):
        raw = Raw(cluster, "client")
        first = await raw.call(0, m.InitProducerIdRequest("idle", 60_000))
        updated = cluster.brokers[0].transaction_coordinator.transactions["idle"].update_ms
        # checks every 10 s from the first leadership (time 0); due once updated <= now - 60 000
        await cluster.clock.sleep_until(80_000)
        (expired,) = sink.of_kind("txn.expire")
        assert (updated, expired["time_ms"]) == (1, 70_000)  # 1 <= 70 000 - 60 000; at 60 000 it was not
        assert "idle" not in cluster.brokers[0].transaction_coordinator.transactions
        described = await raw.call(0, m.DescribeTransactionsRequest(("idle",)))
        assert described.transactions[0].error is Errors.TRANSACTIONAL_ID_NOT_FOUND
        again = await raw.call(0, m.InitProducerIdRequest("idle", 60_000))
        assert (again.error, again.producer_epoch) == (
            Errors.NONE,
            0,
        ) and again.producer_id != first.producer_id


async def test_a_stale_coordinator_s_marker_is_fenced_by_the_coordinator_epoch_after_failover(autojump_clock):
    async with _cluster() as (cluster, sink):
        raw = Raw(cluster, "client")
        state_tp = TopicPartition(TRANSACTION_STATE_TOPIC, 0)
        old_epoch = cluster.brokers[0].transaction_coordinator.led[0]
        pid = await _open_on_t0(raw, "stale")
        cluster.crash(0)
        await cluster.clock.sleep_until(cluster.now() + 1_000)
        new = cluster.leader_of(state_tp)
        coordinator = cluster.brokers[new].transaction_coordinator
        new_epoch = coordinator.led[0]
        assert new_epoch > old_epoch
        assert (await raw.call(new, m.EndTxnRequest("stale", pid, 0, False))).error is Errors.NONE
        while coordinator.transactions["stale"].state != COMPLETE_ABORT:
            await cluster.clock.sleep_until(cluster.now() + 1)
        leader = cluster.leader_of(T0)
        log = _leader_log(cluster, T0)
        assert log.producer_state.entries[pid].coordinator_epoch == new_epoch
        end = log.log_end_offset
        # the old coordinator, not yet aware it lost __transaction_state-0, sends its COMMIT marker late
        late = marker_data(pid, 0, True, old_epoch, cluster.now())
        answer = await raw.call(leader, ProduceRequest(-1, 30_000, {T0: late}, "stale-marker"))
        assert answer.partitions[T0].error is Errors.TRANSACTION_COORDINATOR_FENCED
        assert (log.log_end_offset, log.producer_state.aborted) == (end, [AbortedTxn(pid, 0, end - 1)])
        (rejected,) = [e for e in sink.of_kind("append.rejected") if e["op"] == "stale-marker"]
        assert rejected["error"] == "TRANSACTION_COORDINATOR_FENCED"


async def test_transactional_offsets_are_a_transactional_batch_holding_the_offsets_lso(autojump_clock):
    async with _cluster(**{"offsets.topic.num.partitions": 1}) as (cluster, _):
        cluster.ensure_offsets_topic()
        await cluster.clock.sleep_until(cluster.now() + 1)
        raw = Raw(cluster, "client")
        offsets_tp = TopicPartition(OFFSETS_TOPIC, 0)
        pid = (await raw.call(0, m.InitProducerIdRequest("eos", 60_000))).producer_id
        added = await raw.call(0, m.AddPartitionsToTxnRequest("eos", pid, 0, ((OFFSETS_TOPIC, 0),)))
        assert added.error is Errors.NONE
        coordinator = cluster.leader_of(offsets_tp)
        log = _leader_log(cluster, offsets_tp)
        before = log.log_end_offset
        commit = groups.TxnOffsetCommitRequest("g", pid, 0, (groups.CommitOffset("t", 0, 7),))
        assert [e for *_, e in (await raw.call(coordinator, commit)).partitions] == [Errors.NONE]
        # the offsets record is replicated (HW past it) but belongs to the open transaction
        assert (log.high_watermark, log.last_stable_offset) == (before + 1, before)
        assert log.producer_state.ongoing == {pid: before}
        # a fenced epoch cannot write offsets there any more
        stale = groups.TxnOffsetCommitRequest("g", pid, 0, (groups.CommitOffset("t", 0, 8),))
        assert (
            await raw.call(0, m.InitProducerIdRequest("eos", 60_000))
        ).error is Errors.CONCURRENT_TRANSACTIONS
        meta = cluster.brokers[0].transaction_coordinator.transactions["eos"]
        while meta.state != COMPLETE_ABORT:
            await cluster.clock.sleep_until(cluster.now() + 1)
        # the ABORT marker (epoch 1) closed it: the LSO is the HW again and the index has it
        assert (log.high_watermark, log.last_stable_offset) == (before + 2, before + 2)
        assert log.producer_state.aborted[-1] == AbortedTxn(pid, before, before + 1)
        assert [e for *_, e in (await raw.call(coordinator, stale)).partitions] == [
            Errors.INVALID_PRODUCER_EPOCH
        ]
        assert log.log_end_offset == before + 2


async def test_markers_held_to_a_partition_go_out_when_the_hold_ends(autojump_clock):
    async with _cluster() as (cluster, sink):
        raw = Raw(cluster, "client")
        coordinator = cluster.brokers[0].transaction_coordinator
        pid = (await raw.call(0, m.InitProducerIdRequest("held", 60_000))).producer_id
        assert (
            await raw.call(0, m.AddPartitionsToTxnRequest("held", pid, 0, (("t", 0),)))
        ).error is Errors.NONE
        assert (await raw.call(0, _records(pid, 0, 0, 2))).partitions[T0].error is Errors.NONE
        log = _leader_log(cluster, T0)
        # markers to t-0 are held until `until`; any other partition's would go at once
        until = cluster.now() + 500
        for broker in cluster.brokers:
            broker.marker_hold = lambda tp: max(0, until - cluster.now()) if tp == T0 else 0
        assert (await raw.call(0, m.EndTxnRequest("held", pid, 0, False))).error is Errors.NONE
        meta = coordinator.transactions["held"]
        assert meta.state == PREPARE_ABORT and cluster.now() < until
        await cluster.clock.sleep_until(until - 1)
        assert (sink.of_kind("txn.markers"), log.last_stable_offset) == ([], 0)  # held: the LSO waits
        await cluster.clock.sleep_until(until + 100)
        (markers,) = sink.of_kind("txn.markers")
        assert (markers["time_ms"], markers["partitions"], markers["marker"]) == (until, ["t-0"], 0)
        assert (meta.state, log.last_stable_offset, log.producer_state.aborted) == (
            COMPLETE_ABORT,
            3,
            [AbortedTxn(pid, 0, 2)],
        )


def test_state_records_hold_times_after_the_clock_origin_and_read_them_back_relative_to_the_readers():
    meta = TransactionMetadata("t", 7, 0, 60_000, ONGOING, {("a", 0)}, start_ms=4_000, update_ms=4_500)
    value = meta.record(origin_ms=1_000_000)  # the writer's clock began at 1,000,000 ms wall-clock time
    assert (json.loads(value)["start_ms"], json.loads(value)["update_ms"]) == (1_004_000, 1_004_500)
    later = TransactionMetadata.from_record(value, origin_ms=1_002_000)  # a reader started 2 s later
    assert (later.start_ms, later.update_ms) == (2_000, 2_500)
    # a transaction begun before the reader's clock began reads as begun at its 0, not at -1 (none open)
    late = TransactionMetadata.from_record(value, origin_ms=1_010_000)
    assert (late.start_ms, late.update_ms) == (0, 0)
    assert TransactionMetadata.from_record(value) == attrs.evolve(
        meta, start_ms=1_004_000, update_ms=1_004_500
    )
    idle = attrs.evolve(meta, state=EMPTY, start_ms=-1)
    assert TransactionMetadata.from_record(idle.record(1_000_000), 1_000_000) == idle
