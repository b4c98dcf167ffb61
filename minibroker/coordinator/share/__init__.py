"""Share groups on the group coordinator (KIP-932): ShareGroupHeartbeat, ShareGroupDescribe and the
``simple`` assignor. docs/kafka-model.md, "Share groups", describes the behaviour."""

from minibroker.coordinator.share.messages import (
    DescribedShareGroup,
    DescribedShareMember,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from minibroker.coordinator.share.share_group import ShareGroup, ShareGroupMember
from minibroker.coordinator.share.share_group_coordinator import ShareGroupCoordinator

__all__ = [
    "DescribedShareGroup",
    "DescribedShareMember",
    "ShareGroup",
    "ShareGroupCoordinator",
    "ShareGroupDescribeRequest",
    "ShareGroupDescribeResponse",
    "ShareGroupHeartbeatRequest",
    "ShareGroupHeartbeatResponse",
    "ShareGroupMember",
]
