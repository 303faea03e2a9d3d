"""The shared core of every backend and of the gateway above them: the ``Backend``
protocols and object facts (``base``), typed storage errors, keys and their checks,
checksums, conditions, streams, regions and units. It imports nothing else of Squall."""
