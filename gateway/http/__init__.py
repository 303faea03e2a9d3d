"""The HTTP server around the ASGI application: uvicorn with the gateway's protocol
(connection limits, slow-client pace, zero-copy bodies) and its worker processes."""
