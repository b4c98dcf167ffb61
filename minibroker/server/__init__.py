"""Front end: Kafka's wire protocol in front of the emulated cluster (``minibroker serve``).

Real Kafka clients (kafka-python, confluent-kafka / librdkafka, aiokafka) connect to one
listener per emulated broker; their requests become the cluster's own produce and fetch
requests, so they wait in the same purgatories. Encoding and decoding go through
kafka-python's ``kafka.protocol`` and ``kafka.record`` (core dependencies); nothing
outside this package imports kafka-python.

Modules: ``frames`` (pure frame splitting with the size limit), ``codec`` (headers,
bodies, the version table), ``records`` (record batch v2 checks and rewriting) and
``compression`` (bounded decompression), ``nulls`` (non-nullable fields sent as null),
``metadata`` / ``produce`` / ``fetch`` (with ``fetch_sessions``) / ``groups`` / ``group_admin``
/ ``admin_topics`` / ``admin_configs`` / ``admin_cluster`` (the handlers), ``handlers`` (the
dispatch table), ``context`` (what a handler sees), ``server`` (trio listeners and connections),
``error_responses`` / ``admin_error_responses`` (Kafka's error response of each API, for pushed
errors and failed requests), ``serve`` (a scenario's cluster plus the server), ``live`` (the
frames of ``serve --tui``), ``commands``
(the CLI), ``control`` (the fault-injection control API on a served cluster) and
``control_http`` (that API over HTTP/JSON, ``serve --control PORT``).
"""
