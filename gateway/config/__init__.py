"""What a gateway is configured with: the settings model and where settings come from
(``settings``, ``sources``, ``flags``), the gateway's credentials and users, TLS, the
cores it may use, and the start-up checks that run before anything is written."""
