"""The bundled features, registered here in the order their sections are read and their runs start.

``minibroker.scenario`` imports this package, so a scenario loaded or run through it knows them; the
registry is ``minibroker.scenario.feature``. Delayed messages come first: their designs start before
the retrying consumer, so a run with both keeps the trace it has always had.
"""

from minibroker.scenario.feature import register
from minibroker.scenario.features import delayed_messages, retry, share

register(delayed_messages.FEATURE)
register(retry.FEATURE)
register(share.FEATURE)
