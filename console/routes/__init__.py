"""The console's JSON API, one module per resource (console/api.py lists the routes)."""
