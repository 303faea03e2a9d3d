"""What a client of the gateway needs, shared by every ``squall`` command, the FUSE mount
and the load tests: signed requests with the client credentials (``signing``) and TLS
contexts (``tls``). It imports only the backends' shared core."""
