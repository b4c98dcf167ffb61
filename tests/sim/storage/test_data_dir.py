"""A cluster kept in a data dir, on the autojump clock: what one cluster writes, the next one started on
the same directory recovers (topics, partition states, logs, high watermarks, offline leaders)."""

from __future__ import annotations

import json

import trio

from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition
from minibroker.coordinator.transaction import TransactionMetadata
from minibroker.sim import TopicSpec, open_cluster
from minibroker.sim.storage.data_dir import DataDir

TP = TopicPartition("t", 0)


def storage(path, notes=None) -> DataDir:
    notes = [] if notes is None else notes
    return DataDir.open(str(path), notes.append)


async def test_a_second_cluster_on_the_same_dir_carries_on_where_the_first_stopped(autojump_clock, tmp_path):
    async with open_cluster(3, [TopicSpec("t", 1, 3)], storage=storage(tmp_path)) as cluster:
        producer = cluster.producer("p", acks=-1)
        assert (await producer.send_and_wait("t", 0, count=3)).base_offsets == {"t-0": 0}
        cluster.move_leader(TP, 1)
        assert (await producer.send_and_wait("t", 0, count=2)).base_offsets == {"t-0": 3}
        await cluster.clock.sleep_until(cluster.now() + 1000)
    stored = json.loads((tmp_path / "cluster.json").read_text())
    assert [(p["leader"], p["leader_epoch"]) for p in stored["partitions"]] == [(1, 1)]
    notes: list[str] = []
    async with open_cluster(3, [TopicSpec("t", 1, 3)], storage=storage(tmp_path, notes)) as cluster:
        assert notes == []
        state = cluster.controller.state[TP]
        assert (state.leader, state.leader_epoch, sorted(state.isr)) == (1, 1, [0, 1, 2])
        logs = [broker.logs[TP] for broker in cluster.brokers]
        assert [(log.log_end_offset, log.high_watermark, log.epochs) for log in logs] == [
            (5, 5, [(0, 0), (1, 3)])
        ] * 3
        producer = cluster.producer("p", acks=-1)
        assert (await producer.send_and_wait("t", 0, count=1)).base_offsets == {"t-0": 5}


async def test_a_partition_stored_offline_gets_a_leader_when_its_replicas_are_back(autojump_clock, tmp_path):
    async with open_cluster(2, [TopicSpec("t", 1, 2)], storage=storage(tmp_path)) as cluster:
        cluster.crash(1)
        cluster.crash(0)
        await cluster.clock.sleep_until(cluster.now() + 10)
        assert cluster.controller.state[TP].leader == -1
    async with open_cluster(2, [TopicSpec("t", 1, 2)], storage=storage(tmp_path)) as cluster:
        await cluster.clock.sleep_until(cluster.now() + 10)
        state = cluster.controller.state[TP]
        # elected at the start: the last ISR member leads again; broker 1 has caught up and is back in the ISR
        assert (cluster.controller.elections, state.leader, state.leader_epoch) == (1, 0, 2)
        assert state.isr == (0, 1)
        producer = cluster.producer("p", acks=-1)
        assert (await producer.send_and_wait("t", 0, count=1)).errors == {"t-0": "NONE"}


async def test_producer_ids_are_never_handed_out_twice_across_restarts(autojump_clock, tmp_path):
    async with open_cluster(1, storage=(first := storage(tmp_path))):
        assert [next(first.producer_ids) for _ in range(3)] == [1000, 1001, 1002]
    assert json.loads((tmp_path / "cluster.json").read_text())["next_producer_id"] == 2000
    async with open_cluster(1, storage=(second := storage(tmp_path))):
        assert next(second.producer_ids) == 2000  # the block stored before 1000 was handed out


async def test_transaction_coordinators_take_ids_above_every_id_the_stored_transactions_hold(
    autojump_clock, tmp_path
):
    async with open_cluster(1, storage=(first := storage(tmp_path))) as cluster:
        context = cluster.brokers[0].transaction_coordinator.context
        assert [context.next_producer_id(), next(first.producer_ids)] == [1000, 1001]  # one sequence
        cluster.ensure_transaction_state_topic()
        await trio.sleep(1)
        # an id written by a coordinator that counted its own ids, and never used on a partition
        meta = TransactionMetadata("old", 5_000_000, 0, 60_000, last_producer_id=5_000_001)
        written: list[Errors] = []
        context.write(context.partition_of("old"), meta.record(), written.append)
        await trio.sleep(1)
        assert written == [Errors.NONE]
    async with open_cluster(1, storage=(second := storage(tmp_path))) as cluster:
        assert cluster.brokers[0].transaction_coordinator.context.next_producer_id() == 5_000_002
        assert next(second.producer_ids) == 5_000_003
