"""Benchmark transactions: CPU per record of transactional produce against plain acks=-1 produce.

Usage::

    python tools/txn_bench.py                     # 3 rounds of 40 groups of 20 sends of 10 records
    python tools/txn_bench.py --rounds 5 --json
    python tools/txn_bench.py --baseline HEAD~5 --pairs 3

Workload: one emulated cluster (3 brokers, topic ``t`` with 3 partitions, replication factor 3,
``min.insync.replicas`` 2, 1 ms links; ``__transaction_state`` with ``--state-partitions``
partitions, Kafka's default 50, replicated on every broker) in virtual time. The same records are
sent two ways, in *groups* of ``--sends`` sends of ``--records`` records each, the sends of a group
spread over the partitions in turn:

- ``plain``: an acks=-1 producer (``Producer.send``) sends the group's sends at one instant and
  waits for every answer;
- ``transactional``: a transactional producer (``TransactionalProducer``, initialised once) runs
  each group as one transaction: ``begin_transaction``, the group's sends, ``commit_transaction``,
  and waits for the commit (AddPartitionsToTxn, the KIP-890 verification of each partition, the
  EndTxn's two ``__transaction_state`` writes and the COMMIT markers included).

What is measured: CPU time (``time.process_time``) around each side's groups, both sides in one
``trio.run`` on the same cluster, in alternating order (round ``r`` runs plain first when ``r`` is
even, transactional first when odd) so both see the same spells of a shared machine. Printed: CPU
microseconds per record of each side, summed over the rounds, and their ratio
(``txn_vs_plain``, transactional ÷ plain: the target is at most 2), with each round's ratio.

``--baseline REV --pairs N`` runs this command from commit REV and from this tree in N alternating
pairs and reports this tree ÷ REV per figure (``tools/bench_baseline.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import trio
import trio.testing

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_baseline import Figure, add_arguments, check, compare_tool

from minibroker.clients.transactional_producer import TransactionalProducer
from minibroker.runtime import quiet_gc
from minibroker.sim.cluster import Cluster, TopicSpec, open_cluster

TOPIC = "t"
PARTITIONS = 3
RECORD_BYTES = 100

#: compared with ``--baseline REV``: this tree ÷ REV
FIGURES = [
    Figure("txn_vs_plain", "lower"),
    Figure("plain_us_per_record", "lower"),
    Figure("txn_us_per_record", "lower"),
]


async def _plain(cluster: Cluster, producer: Any, groups: int, sends: int, records: int) -> None:
    for _ in range(groups):
        requests = [
            producer.send(TOPIC, i % PARTITIONS, records, RECORD_BYTES * records) for i in range(sends)
        ]
        for request in requests:
            await request.wait()
        await cluster.clock.sleep_until(cluster.now() + 1)


async def _transactional(
    cluster: Cluster, producer: TransactionalProducer, groups: int, sends: int, records: int
) -> None:
    for _ in range(groups):
        producer.begin_transaction()
        for i in range(sends):
            producer.send(TOPIC, i % PARTITIONS, records, RECORD_BYTES * records)
        commit = producer.commit_transaction()
        await commit.wait()
        if commit.errors.get(producer.transactional_id) != "NONE":
            raise RuntimeError(f"a commit failed: {commit.errors}")
        await cluster.clock.sleep_until(cluster.now() + 1)


def simulate(
    rounds: int, groups: int, sends: int, records: int, state_partitions: int = 50
) -> dict[str, Any]:
    cpu = {"plain": [0.0] * rounds, "transactional": [0.0] * rounds}

    async def main() -> None:
        config = {"min.insync.replicas": 2, "transaction.state.log.num.partitions": state_partitions}
        async with open_cluster(3, [TopicSpec(TOPIC, PARTITIONS, 3)], config, latency_ms=1) as cluster:
            plain = cluster.producer("plain", acks=-1)
            txn = cluster.producer("txn", {"acks": -1, "transactional.id": "bench"})
            assert isinstance(txn, TransactionalProducer)
            init = txn.init_transactions()
            await init.wait()
            sides = {
                "plain": lambda: _plain(cluster, plain, groups, sends, records),
                "transactional": lambda: _transactional(cluster, txn, groups, sends, records),
            }
            await sides["transactional"]()  # warm up both paths once, untimed
            await sides["plain"]()
            for r in range(rounds):
                order = ["plain", "transactional"] if r % 2 == 0 else ["transactional", "plain"]
                for side in order:
                    started = time.process_time()
                    await sides[side]()
                    cpu[side][r] = time.process_time() - started

    with quiet_gc():
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    per_round = groups * sends * records
    total = rounds * per_round
    plain_us = sum(cpu["plain"]) / total * 1e6
    txn_us = sum(cpu["transactional"]) / total * 1e6
    return {
        "rounds": rounds,
        "groups": groups,
        "sends_per_group": sends,
        "records_per_send": records,
        "records_per_side": total,
        "transaction_state_partitions": state_partitions,
        "plain_us_per_record": round(plain_us, 2),
        "txn_us_per_record": round(txn_us, 2),
        "txn_vs_plain": round(txn_us / plain_us, 3),
        "round_ratios": [round(t / p, 3) for t, p in zip(cpu["transactional"], cpu["plain"], strict=True)],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--groups", type=int, default=40)
    parser.add_argument("--sends", type=int, default=20)
    parser.add_argument("--records", type=int, default=10)
    parser.add_argument("--state-partitions", type=int, default=50)
    parser.add_argument("--json", action="store_true")
    add_arguments(parser)
    args = parser.parse_args(argv)
    if min(args.rounds, args.groups, args.sends, args.records, args.state_partitions) < 1:
        parser.error("--rounds, --groups, --sends, --records and --state-partitions must be >= 1")
    commit = check(parser, args)
    if commit is not None:
        return compare_tool(__file__, argv, FIGURES, commit, args.pairs, args.json, rev=args.baseline)
    figures = simulate(args.rounds, args.groups, args.sends, args.records, args.state_partitions)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for key, value in figures.items():
            print(f"{key:22} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
