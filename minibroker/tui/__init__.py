"""Front end: watch a scenario run — the timing wheel, the delay queue, the purgatories and the ISR.

``minibroker run FILE.toml --tui`` draws it live (``app``); ``minibroker snapshot FILE.toml --at MS``
renders one moment, on the terminal or as SVG/PNG (``commands``). Frames are plain data captured from a
run (``state``) and drawn by pure functions (``render``, ``wheel``), so they are tested on a recording
Console. The run goes at a watchable speed on a ``PacedClock`` (``runtime.paced``), or instantly in
virtual time with frames taken between instants (``virtual``); either way it is the run ``minibroker run``
makes.
"""
