"""Who may use the admin surface: status access, and the users admin API."""
