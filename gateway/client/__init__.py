"""What a client of the gateway needs, one of each for every ``squall`` command, the FUSE
mount (its light request path too), the cost calibration and the load tests: the SigV4
signer (``sigv4``), the client credentials (``credentials``), signed admin and status
requests (``signing``), TLS contexts (``tls``), and the one handler of the client
commands' failures (``failures``). It imports only the backends' shared core."""
