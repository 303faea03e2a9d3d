"""The operator's views: the live dashboard at ``/_squall/ui`` and ``squall top``.

``routes`` mounts the page, its static files and ``/_squall/ui/data`` on the admin
application; ``snapshot`` builds one process's data document, ``merge`` the whole
gateway's from its workers', ``workers`` serves it on the shared port of
``--workers N``; ``top`` is the terminal view. See docs/dashboard.md.
"""
