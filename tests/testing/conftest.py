"""kafka-python's schemas load quietly here too (see tests/server/conftest.py)."""

import tests.server.conftest  # noqa: F401
