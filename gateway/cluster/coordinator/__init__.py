"""Membership, leases and fencing on etcd (``--coordinator etcd://...``).

Each member registers under a lease (:mod:`.session`), every member watches the
registrations (:mod:`.membership`) and computes the ring from them; :mod:`.client` is the
connection to etcd (several endpoints, TLS, user and password), :mod:`.keys` the layout
of what Squall keeps there. See docs/cluster.md.
"""
