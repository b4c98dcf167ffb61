"""quiet_gc: the GC policy of long simulation runs."""

import gc

from minibroker.runtime import quiet_gc


def test_objects_that_survive_a_collection_in_the_block_are_frozen_and_the_policy_is_undone_after():
    saved = gc.get_threshold()
    callbacks = list(gc.callbacks)
    with quiet_gc(threshold=1234):
        assert gc.get_threshold() == (1234, saved[1], saved[2])
        frozen = gc.get_freeze_count()
        kept = [[index] for index in range(100)]
        gc.collect(0)
        assert gc.get_freeze_count() >= frozen + len(kept)
    assert gc.get_threshold() == saved
    assert gc.get_freeze_count() == 0
    assert gc.callbacks == callbacks
