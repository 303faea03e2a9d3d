"""The ``squall`` command line: the root command (``cli``) and one module per
subcommand family (store, sync, users, cluster, qos, cost, top). Nothing imports it but
the entry point; ``squall mount`` lives with the FUSE client (``gateway.fuse_mount``)."""
