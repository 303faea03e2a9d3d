"""The gateway core between the S3 protocol and the storage stack: ``ObjectService``
(``objects``), the per-bucket configuration documents it keeps, and the watch on a
networked store's reachability."""
