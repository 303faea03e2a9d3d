"""``squall serve --workers N``: N worker processes serving one port, each a member of a
ring inside the host (docs/workers.md)."""
