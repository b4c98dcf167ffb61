"""Random transactional load for a chaos schedule (profiles with ``transactions`` > 0).

Drawn from a generator of its own, seeded with (profile, seed, run index, duration), after every
other draw, so the rest of the schedule is what it would be without it:

- 1-2 transactional producers ``x0``, ``x1`` (``transactional.id`` ``txn0``, ``txn1``; random
  ``transaction.timeout.ms``, ``request.timeout.ms``, ``max.block.ms``); each inits, then runs
  transactions one after another: begin, 1-3 sends (1-3 records each, to random partitions of the
  data topics), then commit (weight 6), abort (2) or crash (1, mid-transaction: no EndTxn; a new
  producer of the same id inits next, fencing it). In a fifth of the transactions a successor inits
  *while* the transaction is open and the old producer goes on sending and commits: a zombie;
- one or two READ_COMMITTED consumers ``rc0``, ``rc1`` polling random partitions for random stretches;
- with chance 0.75, the consume-transform-produce loop: topic ``ctp-in`` (1 partition, written by
  acks=-1 producer ``src``), ``ctp-out`` (2 partitions), and 4-12 cycles of the loop;
- every transactional producer speaks the profile's transaction protocol version (2: KIP-890's
  epoch bump at every EndTxn, partitions added by the produce);
- broker settings: ``transaction.state.log.num.partitions`` and ``offsets.topic.num.partitions`` 2,
  a random abort check interval
  (``transaction.abort.timed.out.transaction.cleanup.interval.ms``) and ``request.timeout.ms`` (how
  long the coordinator's writes wait for the ISR).
"""

from __future__ import annotations

import random

import attrs

from minibroker.chaos.schedule import GRACE_MS, PollSpec, ProduceSpec, Schedule
from minibroker.chaos.txn_schedule import (
    INPUT_BYTES,
    INPUT_TOPIC,
    OUTPUT_TOPIC,
    TRANSFORM_TXN,
    TXN_BYTES,
    TransformSpec,
    TxnSpec,
)
from minibroker.scenario.model import ClientSpec, TopicSpecModel, TransactionStep

ENDINGS = {"commit": 6, "abort": 2, "crash": 1}


def _producer_config(rng: random.Random, transactional_id: str, version: int) -> dict:
    config = {
        "acks": -1,
        "transactional.id": transactional_id,
        "transaction.timeout.ms": rng.choice((200, 400, 800)),
        "request.timeout.ms": rng.choice((200, 500)),
        "max.block.ms": rng.choice((500, 1000)),
        "retry.backoff.ms": rng.choice((20, 100)),
        "minibroker.response.grace.ms": GRACE_MS,
    }
    if version != 1:  # no key for version 1: those schedules stay as they were
        config["minibroker.transaction.version"] = version
    return config


def _ending(rng: random.Random) -> str:
    keys = sorted(ENDINGS)
    return rng.choices(keys, [ENDINGS[k] for k in keys])[0]


def add_transactions(
    schedule: Schedule, rng: random.Random, duration_ms: int, transaction_version: int = 1
) -> Schedule:
    """``schedule`` with transactional producers, READ_COMMITTED consumers and the transform loop;
    every transactional producer speaks ``transaction_version`` (KIP-890)."""
    config = {
        **schedule.config,
        "transaction.state.log.num.partitions": 2,
        "offsets.topic.num.partitions": 2,
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": rng.choice((100, 250, 500)),
        "request.timeout.ms": rng.choice((300, 500)),
    }
    parts = schedule.partitions()
    producers = list(schedule.producers)
    txns: list[TxnSpec] = []
    sends = 0
    for k in range(rng.randint(1, 2)):
        base = _producer_config(rng, f"txn{k}", transaction_version)
        generation = 0
        client = f"x{k}"
        producers.append(ClientSpec(client, "producer", base))
        at = rng.randint(1, max(1, duration_ms // 4))
        txns.append(
            TxnSpec(
                f"{client}-init", client, "init", (TransactionStep(at, 0, "init", client, f"{client}-i"),)
            )
        )
        number = 0
        at += rng.randint(10, 100)
        while at < duration_ms - 50:
            name = f"{client}-t{number}"
            steps = [TransactionStep(at, 0, "begin", client)]
            t = at
            for _ in range(rng.randint(1, 3)):
                t += rng.randint(0, 60)
                topic, p = rng.choice(parts)
                records = rng.randint(1, 3)
                steps.append(
                    TransactionStep(t, 0, "send", client, f"s{sends}", topic, p, records, TXN_BYTES + sends)
                )
                sends += 1
            ending = _ending(rng)
            zombie = ending != "crash" and rng.random() < 0.2
            end = min(duration_ms - 1, t + rng.randint(10, 300))
            # every send before the transaction's end, inside the window
            steps = [attrs.evolve(step, at=min(step.at, end)) for step in steps]
            if ending == "crash":
                steps.append(TransactionStep(end, 0, "crash", client))
            else:
                steps.append(TransactionStep(end, 0, ending, client, f"{name}-end"))
            txns.append(TxnSpec(name, client, ending, tuple(steps)))
            if ending == "crash" or zombie:
                generation += 1
                successor = f"x{k}g{generation}"
                producers.append(ClientSpec(successor, "producer", base))
                init_at = rng.randint(at + 1, end + 200) if zombie else end + rng.randint(0, 300)
                init = TransactionStep(init_at, 0, "init", successor, f"{successor}-i")
                txns.append(TxnSpec(f"{successor}-init", successor, "init", (init,)))
                client = successor
                end = max(end, init_at)
            number += 1
            at = end + rng.randint(20, 200)
    consumers = list(schedule.consumers)
    polls = list(schedule.polls)
    for i in range(rng.randint(1, 2)):
        assigned = rng.sample(parts, rng.randint(1, len(parts)))
        consumers.append(
            ClientSpec(
                f"rc{i}",
                "consumer",
                {
                    "isolation.level": "read_committed",
                    "fetch.min.bytes": rng.choice((1, 200)),
                    "fetch.max.wait.ms": rng.choice((10, 100, 300)),
                    "request.timeout.ms": 1000,
                    "minibroker.response.grace.ms": GRACE_MS,
                },
                tuple(sorted((topic, p, 0) for topic, p in assigned)),
            )
        )
        start = rng.randint(1, max(1, duration_ms // 2))
        polls.append(PollSpec(f"rc{i}", start, rng.randint(100, max(100, duration_ms - start))))
    topics = list(schedule.topics)
    produces = list(schedule.produces)
    transform = None
    if rng.random() < 0.75:
        rf = min(3, schedule.brokers)
        topics += [TopicSpecModel(INPUT_TOPIC, 1, rf), TopicSpecModel(OUTPUT_TOPIC, 2, rf)]
        producers.append(
            ClientSpec(
                "src",
                "producer",
                {"acks": -1, "request.timeout.ms": 2000, "minibroker.response.grace.ms": GRACE_MS},
            )
        )
        for i in range(rng.randint(5, 20)):
            at = rng.randint(1, max(1, duration_ms * 3 // 4))
            produces.append(
                ProduceSpec(f"in{i}", at, "src", INPUT_TOPIC, 0, rng.randint(1, 3), INPUT_BYTES + i)
            )
        produces.sort(key=lambda s: (s.at, s.id))
        cycles = []
        at = rng.randint(50, 300)
        while at < duration_ms - 50 and len(cycles) < 12:
            cycles.append((at, _ending(rng)))
            at += rng.randint(80, 300)
        consumer = {
            "isolation.level": "read_committed",
            "fetch.max.wait.ms": 10,
            "request.timeout.ms": 500,
            "minibroker.response.grace.ms": GRACE_MS,
        }
        transform = TransformSpec(
            _producer_config(rng, TRANSFORM_TXN, transaction_version), consumer, tuple(cycles)
        )
    return attrs.evolve(
        schedule,
        config=config,
        topics=tuple(topics),
        producers=tuple(producers),
        consumers=tuple(consumers),
        produces=tuple(produces),
        polls=tuple(polls),
        txns=tuple(txns),
        transform=transform,
    )
