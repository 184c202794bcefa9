"""The browser dashboard: login, pages per family, admin pages, queries and rendering."""
