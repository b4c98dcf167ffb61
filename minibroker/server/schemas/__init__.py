"""Kafka request and response classes kafka-python 3.0 does not have, from schemas in Kafka's JSON form.

ConsumerGroupHeartbeat (API 68, v0-v1) and ConsumerGroupDescribe (API 69, v0-v1) of KIP-848, as in
Kafka 4.0's ``clients/src/main/resources/common/message`` (v1 of the heartbeat adds the subscription
regex, KIP-1082 has the member make its own id; v1 of describe adds each member's type, KIP-1099).
The classes are kafka-python ``ApiMessage`` types built from the JSON files beside this module. The
share-group APIs of KIP-932 have their schemas here too, loaded by ``minibroker.server.share_messages``.
"""

from __future__ import annotations

import sys

from kafka.protocol.api_message import ApiMessage

_HERE = sys.modules[__name__]


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=_HERE):
    pass


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=_HERE):
    pass


class ConsumerGroupDescribeRequest(ApiMessage, load_json=_HERE):
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=_HERE):
    pass


__all__ = [
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupDescribeResponse",
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponse",
]
