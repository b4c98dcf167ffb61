"""The bundled features, registered here in the order their sections are read and their runs start.

``minibroker.scenario`` imports this package, so a scenario loaded or run through it knows them; the
registry is ``minibroker.scenario.feature``.
"""

from minibroker.scenario.feature import register
from minibroker.scenario.features import delayed_messages, retry

register(retry.FEATURE)
register(delayed_messages.FEATURE)
