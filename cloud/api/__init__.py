"""The cloud server's JSON API: sync routes, admin routes and machine heartbeats."""
