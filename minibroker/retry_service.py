"""``minibroker retry-service --bootstrap HOST:PORT --config FILE``: the retry scheduler as a process.

Exit status: 0 after SIGINT/SIGTERM (the current batch finished, offsets committed); 2 with one line for
any misconfiguration (bad TOML, unknown keys, wrong types, missing topics, a cluster or Redis that does
not answer); 1 with one line if Redis or the cluster stays unreachable for ``outage_limit_ms`` (when set;
shorter outages are waited out) or fails in another way while running (nothing is lost: what was not
committed is read again by the next instance).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import sys
import time
from collections.abc import Callable

from minibroker.cliutil import UsageError

BOOTSTRAP = re.compile(r"[^\s,:]+:\d{1,5}(,[^\s,:]+:\d{1,5})*")


def add_parsers(commands: argparse._SubParsersAction) -> dict[str, Callable[[argparse.Namespace], int]]:
    parser = commands.add_parser(
        "retry-service",
        help="bring retried records back from <topic>-retry-<n> when due (any Kafka cluster)",
        description="Consume the retry topics of the configured topics, hold each record until its "
        "retry.due.ms (wheel in memory, or a Redis sorted set), then produce it back to its topic with "
        "acks=all (to <topic>-dlt after its last attempt). See docs/retry-service.md.",
    )
    parser.add_argument("--bootstrap", required=True, metavar="HOST:PORT", help="the cluster's brokers")
    parser.add_argument("--config", required=True, metavar="FILE", help="the service's TOML file")
    return {"retry-service": _retry_service}


#: kafka-python's lines about a connection it lost or cannot make: during an outage it writes several per
#: second; one of them per ``NOISE_EVERY_S`` is shown (the service's own outage lines say the rest)
CONNECTION_NOISE = (
    "KafkaConnectionError",
    "No node available",
    "Marking the coordinator dead",
    "NodeNotReady",
    "Failed to produce messages",  # one per expired batch: the service's own line counts them
)
NOISE_EVERY_S = 30.0


class _ConnectionNoise(logging.Filter):
    """Let one of kafka-python's connection lines through per ``NOISE_EVERY_S``, without its traceback,
    so that an outage the service does not meet in its own calls (while it has nothing to produce or
    commit) is still visible; every other line passes."""

    def __init__(self) -> None:
        super().__init__()
        self._shown_at = -NOISE_EVERY_S

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if not record.name.startswith("kafka.net") and not any(m in message for m in CONNECTION_NOISE):
            return True
        now = time.monotonic()
        if now - self._shown_at < NOISE_EVERY_S:
            return False
        self._shown_at = now
        record.msg, record.args = f"{message} (lines like this: one per {NOISE_EVERY_S:.0f} s)", None
        record.exc_info, record.exc_text = None, None
        return True


def _client_logging() -> logging.Handler:
    """kafka-python's warnings and errors, one line each on stderr (its logger has only a NullHandler),
    its connection noise thinned out; ``MINIBROKER_RETRY_DEBUG=1`` shows all its lines, debug included."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("retry-service: %(name)s: %(levelname)s: %(message)s"))
    debug = bool(os.environ.get("MINIBROKER_RETRY_DEBUG"))
    if not debug:
        handler.addFilter(_ConnectionNoise())
    kafka_logger = logging.getLogger("kafka")
    kafka_logger.addHandler(handler)
    kafka_logger.setLevel(logging.DEBUG if debug else logging.WARNING)
    return handler


def _retry_service(args: argparse.Namespace) -> int:
    from minibroker.retry.outage import OutageLimitExceeded
    from minibroker.retry.service import RetryService, ServiceError
    from minibroker.retry.service_config import ConfigError, load_config

    if not BOOTSTRAP.fullmatch(args.bootstrap):
        raise UsageError(f"--bootstrap {args.bootstrap!r}: expected HOST:PORT[,HOST:PORT...]")
    try:
        config = load_config(args.config)
    except ConfigError as error:
        raise UsageError(f"retry-service: {error}") from None
    service = RetryService(config, args.bootstrap)
    handler = None
    previous = {sig: signal.signal(sig, lambda *_: service.stop()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        service.open()  # its failures are one line of ours: kafka-python's own lines only from here on
        handler = _client_logging()
        service.log(f"started: {len(service.sources)} retry topics, backend {config.backend.kind}")
        service.run()
    except ServiceError as error:
        raise UsageError(f"retry-service: {error}") from None
    except OutageLimitExceeded as error:  # nothing lost: the commit rule held through the outage
        print(f"minibroker: retry-service: {error}", file=sys.stderr)
        return 1
    except Exception as error:  # a failure while running: one line; the uncommitted is read again
        print(f"minibroker: retry-service: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    finally:
        if handler is not None:  # closing makes kafka-python log cancelled requests: not news
            logging.getLogger("kafka").removeHandler(handler)
        try:
            service.close()
        finally:
            for sig, previous_handler in previous.items():
                signal.signal(sig, previous_handler)
    service.log(f"stopped: {service.summary()}")
    return 0
