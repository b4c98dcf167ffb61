"""The emulator's admin client: DeleteRecords and ElectLeaders, as the other clients' requests are.

``cluster.admin(client_id)`` makes one. ``delete_records`` sends one
DeleteRecordsRequest per leader (Kafka's AdminClient does the same) and returns
their ``ClientRequest`` records: ``errors`` per partition and ``low_watermarks``
(the low watermark each partition answered with, -1 on error), completed with the
broker's cause (``immediate``, ``condition`` or ``expiry``) or ``network``.
``elect_leaders`` sends one ElectLeadersRequest to the lowest live broker (the node
Metadata names as the controller, where Kafka's AdminClient sends it) or to the broker named;
that broker answers once every elected leader is in its metadata. ``list_offsets`` (every
client has it) sends ListOffsets to each partition's leader.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from minibroker.clients.request import Client, ClientRequest
from minibroker.common.messages import (
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    NetworkError,
    TopicPartition,
)

#: the admin client's default DeleteRecords timeout (Kafka's AdminClient: default.api.timeout.ms
#: bounds it; the broker waits ``timeout_ms`` of the request)
DEFAULT_TIMEOUT_MS = 30_000
#: how long past ``timeout_ms`` the client waits for the answer before it gives up
RESPONSE_GRACE_MS = 1000


class AdminClient(Client):
    """Sends DeleteRecords to the leaders of the partitions named, ElectLeaders to one broker."""

    def delete_records(
        self,
        offsets: Mapping[TopicPartition, int],
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        name: str | None = None,
    ) -> list[ClientRequest]:
        """Delete every record below each offset (-1: the HW); one request per leader."""
        requests = []
        groups = self._group_by_leader(offsets)
        for leader, tps in sorted(groups.items()):
            request = self._open(
                "delete_records",
                leader,
                tps,
                name,
                len(groups) > 1,
                lambda tps=tps: {"offsets": [offsets[tp] for tp in tps], "timeout_ms": timeout_ms},
            )
            requests.append(request)
            if request.completed:
                continue
            message = DeleteRecordsRequest({tp: offsets[tp] for tp in tps}, timeout_ms, request.id)
            self._send(request, message, timeout_ms, RESPONSE_GRACE_MS)
        return requests

    def elect_leaders(
        self,
        partitions: list[TopicPartition],
        election_type: int = 0,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        name: str | None = None,
        broker: int | None = None,
    ) -> ClientRequest:
        """Elect a leader (0: preferred, 1: unclean) for each partition; one request to one broker."""
        if broker is None:
            broker = next((b.broker_id for b in self.cluster.brokers if b.alive), -1)
        request = self._open(
            "elect_leaders",
            broker,
            list(partitions),
            name,
            False,
            lambda: {"election": election_type, "timeout_ms": timeout_ms},
        )
        if not request.completed:
            message = ElectLeadersRequest(tuple(partitions), election_type, timeout_ms, request.id)
            self._send(request, message, timeout_ms, RESPONSE_GRACE_MS)
        return request

    def _on_response(self, request: ClientRequest, response: Any) -> None:
        if isinstance(response, NetworkError):
            self._fail_all(request, response.error, "network")
            return
        if isinstance(response, ElectLeadersResponse):
            for tp, part in response.partitions.items():
                request.errors[str(tp)] = part.error.name
            self._finish(request, response.cause)
            return
        assert isinstance(response, DeleteRecordsResponse)
        for tp, part in response.partitions.items():
            request.errors[str(tp)] = part.error.name
            request.low_watermarks[str(tp)] = part.low_watermark
        self._finish(request, response.cause)
