"""The dashboard's Jinja templates (shipped as package data of ``engram_cloud.templates``)."""
