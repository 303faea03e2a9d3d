"""Performance gears (G-states) per bucket: QoS classes, the tuning controller, enforcement
on the request and flush paths, and billing per gear-second (docs/qos.md)."""
