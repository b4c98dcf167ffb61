"""Public import paths that moved keep working for one release: each warns once, gives the same names."""

import importlib
import sys
import warnings

import pytest

#: old package -> (its new home, the names it exported)
MOVED = {
    "minibroker.cluster": (
        "minibroker.sim",
        [
            "BrokerConfig",
            "ClientRequest",
            "Cluster",
            "ConfigError",
            "Consumer",
            "ConsumerConfig",
            "Errors",
            "ProduceData",
            "Producer",
            "ProducerConfig",
            "TopicPartition",
            "TopicSpec",
            "open_cluster",
        ],
    ),
    "minibroker.delay": (
        "minibroker.delayed_messages",
        [
            "DEFAULT_LEVELS",
            "DUE_MS",
            "MESSAGE_ID",
            "OFFSETS_TOPIC",
            "REAL_PARTITION",
            "REAL_TOPIC",
            "DelayConfig",
            "DelayError",
            "DelayLevels",
            "DelayService",
            "DelayServices",
            "DelayStats",
            "DelayedMessage",
            "Delivery",
        ],
    ),
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_warns_once_naming_its_new_home_and_still_works(old, monkeypatch):
    new, names = MOVED[old]
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=rf"{old} is deprecated.*{new}") as caught:
        shim = importlib.import_module(old)
    assert len([w for w in caught if old in str(w.message)]) == 1
    home = importlib.import_module(new)
    assert sorted(shim.__all__) == sorted(names)
    assert all(getattr(shim, name) is getattr(home, name) for name in names)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert importlib.import_module(old) is shim
