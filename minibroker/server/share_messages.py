"""kafka-python classes for the share-group APIs (76-79, 90-92), from ``minibroker/server/schemas``."""

from __future__ import annotations

from typing import Any

from kafka.protocol.api_message import ApiMessage

from minibroker.server import schemas


def _message(name: str) -> Any:
    """The kafka-python class of ``schemas/<name>.json``."""
    return type(name, (ApiMessage,), {"__module__": __name__}, load_json=schemas)


ShareGroupHeartbeatRequest = _message("ShareGroupHeartbeatRequest")
ShareGroupHeartbeatResponse = _message("ShareGroupHeartbeatResponse")
ShareGroupDescribeRequest = _message("ShareGroupDescribeRequest")
ShareGroupDescribeResponse = _message("ShareGroupDescribeResponse")
ShareFetchRequest = _message("ShareFetchRequest")
ShareFetchResponse = _message("ShareFetchResponse")
ShareAcknowledgeRequest = _message("ShareAcknowledgeRequest")
ShareAcknowledgeResponse = _message("ShareAcknowledgeResponse")
DescribeShareGroupOffsetsRequest = _message("DescribeShareGroupOffsetsRequest")
DescribeShareGroupOffsetsResponse = _message("DescribeShareGroupOffsetsResponse")
AlterShareGroupOffsetsRequest = _message("AlterShareGroupOffsetsRequest")
AlterShareGroupOffsetsResponse = _message("AlterShareGroupOffsetsResponse")
DeleteShareGroupOffsetsRequest = _message("DeleteShareGroupOffsetsRequest")
DeleteShareGroupOffsetsResponse = _message("DeleteShareGroupOffsetsResponse")
