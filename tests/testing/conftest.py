"""kafka-python's schemas load quietly here too (see tests/wire/conftest.py)."""

import tests.wire.conftest  # noqa: F401
