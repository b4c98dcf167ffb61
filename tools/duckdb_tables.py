"""The tables of ``minibroker analyze`` computed again with DuckDB: the bench's reference.

Every table but ``skipped``, ``transactions`` and ``lso_lag``.

``tools/pipeline_bench.py`` times this against the Spark job on the same trace files
and checks that both give the same rows. The SQL follows docs/pipeline.md, not the
Spark code: operations by (trace, broker, purgatory, op), status in the documented
order, nearest-rank percentiles (``ceil(p * n)``-th smallest), buckets
``time_ms // B * B``, "last" = highest ``seq``. Parquet and JSONL traces are read
(JSONL lines that do not parse are not counted here: the bench writes Parquet).

    tables(paths, bucket_ms) -> {table name: rows as dicts, sorted by the table's keys}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from minibroker.analytics.keys import KEYS as _ANALYZE_KEYS

#: analyze's tables that DuckDB computes too (not ``skipped``, ``transactions``, ``lso_lag``)
_NOT_HERE = ("skipped", "transactions", "lso_lag")
#: the consumer group events the ``rebalances`` table reads (both protocols)
GROUP_KINDS = (
    "('group.state', 'group.session.expire', 'group.consumer.epoch', 'group.consumer.state', "
    "'group.consumer.fence', 'group.consumer.release', 'group.consumer.own')"
)
KEYS = {name: keys for name, keys in _ANALYZE_KEYS.items() if name not in _NOT_HERE}
ISR_KINDS = "('leader', 'isr.commit', 'controller.isr', 'controller.elect')"
COLUMNS = (
    "seq BIGINT, time_ms BIGINT, kind VARCHAR, broker BIGINT, purgatory VARCHAR, op VARCHAR, "
    "partition VARCHAR, count BIGINT, cause VARCHAR, data VARCHAR"
)
_JSON_COLUMNS = (
    "{" + ", ".join(f"'{pair.split()[0]}': '{pair.split()[1]}'" for pair in COLUMNS.split(", ")) + "}"
)


def _source(paths: list[Path]) -> str:
    parquet = [str(p.resolve()) for p in paths if p.suffix == ".parquet"]
    jsonl = [str(p.resolve()) for p in paths if p.suffix != ".parquet"]
    names = ", ".join(pair.split()[0] for pair in COLUMNS.split(", "))
    parts = []
    if parquet:
        parts.append(f"SELECT filename AS trace, {names} FROM read_parquet({parquet!r}, filename = true)")
    if jsonl:
        parts.append(
            f"SELECT filename AS trace, {names} FROM read_json({jsonl!r}, format = 'newline_delimited', "
            f"columns = {_JSON_COLUMNS}, filename = true)"
        )
    return " UNION ALL BY NAME ".join(parts)


def _statements(source: str, b: int) -> list[str]:
    bucket = f"time_ms // {b} * {b}"
    return [
        f"CREATE TEMP TABLE traces AS SELECT trace, count(*) AS events, "
        f"count(*) FILTER (kind IS NULL) AS skipped, min(time_ms) AS start_ms, max(time_ms) AS end_ms, "
        f"coalesce(bool_or(kind = 'op.expire'), false) AS has_expire FROM ({source}) GROUP BY trace",
        f"""CREATE TEMP TABLE rel AS SELECT trace, seq, time_ms, kind, broker, purgatory, op, cause,
            partition, count, {bucket} AS bucket_ms,
            CASE WHEN kind LIKE 'op.%' THEN CASE
                WHEN purgatory = 'Produce' THEN 'produce'
                WHEN purgatory = 'Fetch' AND regexp_full_match(op, 'b[0-9]+-replica-fetch-[0-9]+')
                    THEN 'follower-fetch'
                WHEN purgatory = 'Fetch' THEN 'consumer-fetch'
                ELSE lower(purgatory) END END AS op_kind,
            CASE WHEN kind = 'op.create' THEN (data ->> '$.delay_ms')::BIGINT END AS delay_ms,
            CASE WHEN kind = 'timer.fire' THEN (data ->> '$.expiration')::BIGINT END AS expiration,
            CASE WHEN kind = 'purge' THEN (data ->> '$.watched')::BIGINT END AS watched,
            CASE WHEN kind = 'purge' THEN (data ->> '$.num_delayed')::BIGINT END AS num_delayed,
            CASE WHEN kind = 'hw' THEN (data ->> '$.hw')::BIGINT END AS hw,
            CASE WHEN kind IN {ISR_KINDS} THEN (data -> '$.isr')::VARCHAR END AS isr,
            CASE WHEN kind = 'fault' THEN data ->> '$.fault' END AS fault,
            CASE WHEN kind = 'op.cancel' THEN (data -> '$.ops')::VARCHAR[] END AS cancelled,
            CASE WHEN kind = 'delay.delivered' THEN data ->> '$.design' END AS design,
            CASE WHEN kind = 'delay.delivered' THEN (data ->> '$.lateness_ms')::BIGINT END AS lateness_ms
            FROM ({source}) WHERE kind IN ('op.create', 'op.complete', 'op.expire', 'op.cancel',
            'timer.fire', 'purge', 'hw', 'fault', 'delay.delivered', {ISR_KINDS[1:-1]})""",
        """CREATE TEMP TABLE ops AS WITH o AS (
            SELECT trace, broker, purgatory, op, any_value(op_kind) AS op_kind,
              count(*) FILTER (kind = 'op.create') AS creations,
              min(seq) FILTER (kind = 'op.create') AS created_seq,
              min(time_ms) FILTER (kind = 'op.create') AS created_ms,
              max(delay_ms) FILTER (kind = 'op.create') AS delay_ms,
              count(*) FILTER (kind = 'op.complete') AS completions,
              min(time_ms) FILTER (kind = 'op.complete') AS completed_ms,
              arg_min(coalesce(cause, ''), seq) FILTER (kind = 'op.complete') AS first_cause,
              count(*) FILTER (kind = 'op.expire') AS expirations,
              min(seq) FILTER (kind = 'op.expire') AS expire_seq,
              min(seq) FILTER (kind = 'op.complete' AND cause = 'expiry') AS expiry_seq
            FROM rel WHERE kind IN ('op.create', 'op.complete', 'op.expire') GROUP BY ALL),
          crashes AS (SELECT trace, broker, max(seq) AS crash_seq FROM rel
            WHERE kind = 'fault' AND fault IN ('crash', 'shutdown') GROUP BY ALL),
          cancelled AS (SELECT DISTINCT trace, broker, unnest(cancelled) AS op FROM rel
            WHERE kind = 'op.cancel'),
          s AS (SELECT o.*, o.created_ms + o.delay_ms AS deadline_ms, t.end_ms, t.has_expire,
              CASE WHEN first_cause IS NULL THEN NULL
                WHEN first_cause IN ('condition', 'expiry', 'leadership') THEN first_cause
                ELSE 'other' END AS cause,
              CASE WHEN completions > 0 THEN 'completed'
                WHEN x.op IS NOT NULL THEN 'cancelled'
                WHEN c.crash_seq > created_seq THEN 'crashed'
                WHEN o.created_ms + o.delay_ms >= t.end_ms THEN 'waiting'
                ELSE 'lost' END AS status
            FROM o JOIN traces t USING (trace) LEFT JOIN crashes c USING (trace, broker)
            LEFT JOIN cancelled x USING (trace, broker, op))
          SELECT *, completed_ms - created_ms AS latency_ms,
            list_filter([
              CASE WHEN status = 'lost' THEN 'completed 0 times' END,
              CASE WHEN completions >= 2 THEN 'completed 2+ times' END,
              CASE WHEN expirations >= 1 AND (expiry_seq IS NULL OR expiry_seq > expire_seq)
                THEN 'on_expiration without on_complete' END,
              CASE WHEN expirations >= 2 THEN 'on_expiration 2+ times' END,
              CASE WHEN has_expire AND cause = 'expiry' AND expirations = 0
                THEN 'expiry without on_expiration' END,
              CASE WHEN creations >= 2 THEN 'created 2+ times' END,
              CASE WHEN created_seq IS NULL THEN 'no op.create' END], lambda p: p IS NOT NULL) AS problems
          FROM s""",
        f"""CREATE TEMP TABLE groups AS SELECT trace, seq, time_ms, kind, broker, partition,
            data ->> '$.group' AS "group", data ->> '$.state' AS state, data ->> '$.reason' AS reason,
            data ->> '$.pending' AS pending,
            CASE WHEN kind LIKE 'group.consumer.%' THEN 'consumer' ELSE 'classic' END AS protocol
            FROM ({source}) WHERE kind IN {GROUP_KINDS}""",
        f"""CREATE TEMP TABLE retried AS WITH e AS (SELECT trace, seq, time_ms, kind,
              data ->> '$.client' AS client, data ->> '$.origin' AS origin FROM ({source})
              WHERE kind IN ('retry.deliver', 'retry.processed', 'retry.dead'))
            SELECT trace, client, origin, count(*) FILTER (kind = 'retry.deliver') AS attempts,
              min(time_ms) FILTER (kind = 'retry.deliver') AS first_ms,
              coalesce(arg_min(CASE WHEN kind = 'retry.dead' THEN 'dead' ELSE 'processed' END, seq)
                FILTER (kind <> 'retry.deliver'), 'pending') AS outcome,
              arg_min(time_ms, seq) FILTER (kind <> 'retry.deliver') AS end_ms
            FROM e GROUP BY ALL HAVING count(*) FILTER (kind = 'retry.deliver') > 0""",
        f"""CREATE TEMP TABLE shared AS SELECT trace, kind, partition, count, cause,
              data ->> '$.group' AS "group", (data ->> '$.delivery_count')::BIGINT AS delivery_count,
              (data ->> '$.latency_ms')::BIGINT AS latency_ms FROM ({source})
            WHERE kind IN ('share.acquire', 'share.lock.expire', 'share.archive', 'share.accept')""",
    ]


def _ranks(column: str, *names: str) -> str:
    """Nearest-rank percentiles of ``column``, each name ``p<digits>[_ms]`` (p50: 0.5, p999: 0.999)."""
    return ", ".join(
        f"list_sort(list({column}))[greatest(1, ceil(0.{name[1:].split('_')[0]} * count(*)))::BIGINT] "
        f"AS {name}"
        for name in names
    )


def _queries(b: int) -> dict[str, str]:
    percentiles = _ranks("latency_ms", "p50", "p90", "p99", "p999")
    latency = f"count(*) AS count, {percentiles}, max(latency_ms) AS max, avg(latency_ms) AS mean"
    done = "FROM ops WHERE completions > 0 AND created_ms IS NOT NULL"
    dead = "FILTER (outcome = 'dead')"
    to_dlt = ", ".join(
        f"list_sort(list(end_ms - first_ms) {dead})[greatest(1, ceil({p} * count(*) {dead}))::BIGINT] AS {n}"
        for n, p in (("p50_ms", 0.5), ("p99_ms", 0.99))
    )
    timed = "FILTER (kind = 'share.accept' AND latency_ms IS NOT NULL)"
    accept_ranks = ", ".join(
        f"list_sort(list(latency_ms) {timed})[greatest(1, ceil({p} * count(*) {timed}))::BIGINT] AS {n}"
        for n, p in (("p50_ms", 0.5), ("p99_ms", 0.99))
    )
    return {
        "traces": "SELECT * FROM traces",
        "operations": """SELECT purgatory, op_kind, count(created_seq) AS created,
            count(*) FILTER (status = 'completed') AS completed,
            count(*) FILTER (status = 'cancelled') AS cancelled,
            count(*) FILTER (status = 'crashed') AS crashed,
            count(*) FILTER (status = 'waiting') AS waiting,
            count(*) FILTER (status = 'lost') AS lost,
            count(*) FILTER (cause = 'condition') AS condition,
            count(*) FILTER (cause = 'expiry') AS expiry,
            count(*) FILTER (cause = 'leadership') AS leadership,
            count(*) FILTER (len(problems) > 0) AS with_problems,
            CASE WHEN completed > 0 THEN expiry / completed END::DOUBLE AS expiry_rate
            FROM ops GROUP BY ALL""",
        "latency": f"SELECT purgatory, op_kind, cause, {latency} {done} GROUP BY ALL "
        f"UNION ALL SELECT purgatory, op_kind, 'all' AS cause, {latency} {done} GROUP BY ALL",
        "rate": f"""SELECT bucket_ms, purgatory, op_kind, count(*) FILTER (kind = 'op.create') AS created,
            count(*) FILTER (kind = 'op.complete') AS completed,
            count(*) FILTER (kind = 'op.complete' AND cause = 'expiry') AS expired,
            count(*) FILTER (kind = 'op.create') * 1000.0::DOUBLE / {b} AS created_per_s
            FROM rel WHERE kind IN ('op.create', 'op.complete') GROUP BY ALL""",
        "timer_precision": "SELECT time_ms - expiration AS delta_ms, count(*) AS fires FROM rel "
        "WHERE kind = 'timer.fire' GROUP BY ALL",
        "purgatory_size": """WITH e AS (SELECT *, CASE WHEN kind = 'op.create' THEN 1 ELSE -1 END AS delta
              FROM rel WHERE kind IN ('op.create', 'op.complete')),
            l AS (SELECT *, sum(delta) OVER (PARTITION BY trace, broker, purgatory ORDER BY seq) AS after
              FROM e),
            f AS (SELECT trace, broker, purgatory, bucket_ms,
              count(*) FILTER (kind = 'op.create') AS created,
              count(*) FILTER (kind = 'op.complete') AS completed,
              max(greatest(after, after - delta)) AS peak
              FROM l GROUP BY ALL),
            p AS (SELECT trace, broker, purgatory, bucket_ms, count(*) AS purges, sum(count) AS purged,
              arg_max_null(watched, seq) AS watched, arg_max_null(num_delayed, seq) AS num_delayed
              FROM rel WHERE kind = 'purge' GROUP BY ALL),
            j AS (SELECT trace, broker, purgatory, bucket_ms, coalesce(created, 0) AS created,
              coalesce(completed, 0) AS completed, coalesce(purges, 0) AS purges,
              coalesce(purged, 0)::BIGINT AS purged, watched, num_delayed, peak
              FROM f FULL JOIN p USING (trace, broker, purgatory, bucket_ms)),
            w AS (SELECT * EXCLUDE (peak), sum(created - completed) OVER (PARTITION BY trace, broker,
              purgatory ORDER BY bucket_ms ROWS UNBOUNDED PRECEDING)::BIGINT AS waiting,
              peak FROM j)
            SELECT * EXCLUDE (peak), coalesce(peak, waiting)::BIGINT AS max_waiting FROM w""",
        "hw": """SELECT trace, partition, bucket_ms, arg_max_null(hw, seq) AS hw,
            arg_max_null(broker, seq) AS leader, count(*) AS changes FROM rel WHERE kind = 'hw'
            GROUP BY ALL""",
        "isr": f"""SELECT trace, partition, bucket_ms, arg_max_null(isr, seq) AS isr,
            arg_max_null(json_array_length(isr), seq)::BIGINT AS isr_size,
            min(json_array_length(isr))::BIGINT AS min_isr_size, count(*) AS changes
            FROM rel WHERE kind IN {ISR_KINDS} GROUP BY ALL""",
        "audit": """SELECT trace, broker, purgatory, op_kind, op, created_ms, deadline_ms, completions,
            expirations, status, unnest(problems) AS problem FROM ops""",
        "retry_attempts": "SELECT trace, client, outcome, attempts, count(*) AS records FROM retried "
        "GROUP BY ALL",
        "retry_dlt": f"""SELECT trace, client, count(*) AS records,
            count(*) FILTER (outcome = 'processed') AS processed, count(*) {dead} AS dead,
            count(*) FILTER (outcome = 'pending') AS pending, {to_dlt},
            max(end_ms - first_ms) {dead} AS max_ms FROM retried GROUP BY ALL""",
        "share_groups": f"""SELECT trace, "group", partition,
            coalesce(sum(count) FILTER (kind = 'share.acquire'), 0)::BIGINT AS acquired,
            coalesce(sum(count) FILTER (kind = 'share.acquire' AND delivery_count > 1), 0)::BIGINT
              AS redelivered,
            count(*) FILTER (kind = 'share.lock.expire') AS lock_expiries,
            count(*) FILTER (kind = 'share.accept') AS accepted,
            count(*) FILTER (kind = 'share.archive' AND cause = 'reject') AS rejected,
            count(*) FILTER (kind = 'share.archive' AND cause = 'limit') AS at_limit,
            {accept_ranks} FROM shared GROUP BY ALL""",
        "rebalances": _REBALANCES,
        "delay_lateness": f"""SELECT design, count(*) AS delivered,
            {_ranks("lateness_ms", "p50_ms", "p99_ms")}, max(lateness_ms) AS max_ms
            FROM rel WHERE kind = 'delay.delivered' GROUP BY ALL""",
    }


#: classic: PreparingRebalance to the next Stable after CompletingRebalance; consumer: the first epoch
#: bump after the group was Stable or Empty to the next Stable, and each partition's release to its
#: next owner (docs/pipeline.md)
_REBALANCES = """WITH
  c AS (SELECT *, last_value(CASE WHEN state = 'PreparingRebalance' THEN time_ms END IGNORE NULLS)
      OVER (PARTITION BY trace, broker, "group" ORDER BY seq) AS start_ms,
    lag(state) OVER (PARTITION BY trace, broker, "group" ORDER BY seq) AS previous
    FROM groups WHERE kind = 'group.state'),
  classic AS (SELECT trace, broker, "group", time_ms - start_ms AS took FROM c
    WHERE state = 'Stable' AND previous = 'CompletingRebalance' AND start_ms IS NOT NULL),
  e AS (SELECT *, kind = 'group.consumer.state' AND state IN ('Stable', 'Empty') AS settled
    FROM groups WHERE kind IN ('group.consumer.epoch', 'group.consumer.state')),
  s AS (SELECT *, coalesce(sum(settled::BIGINT) OVER (PARTITION BY trace, broker, "group" ORDER BY seq
      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS segment FROM e),
  consumer AS (SELECT trace, broker, "group",
      max(time_ms) FILTER (settled AND state = 'Stable') - min(time_ms) FILTER (kind = 'group.consumer.epoch')
      AS took FROM s GROUP BY trace, broker, "group", segment),
  took AS (SELECT *, 'classic' AS protocol FROM classic
    UNION ALL SELECT *, 'consumer' AS protocol FROM consumer WHERE took IS NOT NULL),
  durations AS (SELECT trace, broker, "group", protocol, count(*) AS rebalances, min(took) AS min_ms,
    round(avg(took), 1) AS mean_ms, max(took) AS max_ms FROM took GROUP BY ALL),
  expiries AS (SELECT trace, broker, "group", protocol, count(*) AS session_expiries FROM groups
    WHERE (kind = 'group.session.expire' AND pending = 'false')
      OR (kind = 'group.consumer.fence' AND reason = 'session timeout') GROUP BY ALL),
  o AS (SELECT *, lag(kind) OVER w AS previous, lag(time_ms) OVER w AS released_ms FROM groups
    WHERE kind IN ('group.consumer.release', 'group.consumer.own')
    WINDOW w AS (PARTITION BY trace, broker, "group", partition ORDER BY seq)),
  stops AS (SELECT trace, broker, "group", 'consumer' AS protocol, count(*) AS partition_stops,
    max(time_ms - released_ms) AS max_stop_ms FROM o
    WHERE kind = 'group.consumer.own' AND previous = 'group.consumer.release' GROUP BY ALL)
  SELECT trace, broker, "group", protocol, coalesce(rebalances, 0) AS rebalances, min_ms, mean_ms, max_ms,
    coalesce(session_expiries, 0) AS session_expiries,
    CASE WHEN protocol = 'consumer' THEN coalesce(partition_stops, 0) END AS partition_stops, max_stop_ms
  FROM durations FULL JOIN expiries USING (trace, broker, "group", protocol)
    FULL JOIN stops USING (trace, broker, "group", protocol)"""


def _sort_key(row: dict[str, Any], keys: tuple[str, ...]) -> tuple:
    return tuple((row[k] is not None, row[k] if row[k] is not None else "") for k in keys)


def tables(paths: list[Path], bucket_ms: int, threads: int | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every table, each row a dict, rows sorted by the table's keys."""
    import duckdb

    connection = duckdb.connect(":memory:")
    if threads:
        connection.execute(f"SET threads = {int(threads)}")
    for statement in _statements(_source(paths), int(bucket_ms)):
        connection.execute(statement)
    result = {}
    for name, query in _queries(int(bucket_ms)).items():
        cursor = connection.execute(query)
        names = [d[0] for d in cursor.description]
        rows = [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]
        result[name] = sorted(rows, key=lambda row, k=KEYS[name]: _sort_key(row, k))
    connection.close()
    return result
