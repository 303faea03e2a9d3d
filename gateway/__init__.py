"""The Squall gateway. Layers, from the bottom: S3's vocabulary (``protocol``) and the
configuration (``config``); the cache tier (``cache``), object versions
(``versioning``), lifecycle rules (``lifecycle``), clusters of gateways (``cluster``),
limits (``qos``) and costs (``cost``); the core service (``service``); the S3 API
(``s3api``), its authorization (``auth``) and the dashboard (``dashboard``); the
application and its composition root (``app``, ``components``); the HTTP server and its
worker processes (``http``); the ``squall`` commands (``commands``). The FUSE mount
(``fuse_mount``) is a client of the gateway. docs/architecture.md draws the layers."""
