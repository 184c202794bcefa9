"""Cloud sync from a client: the HTTP client, config and state, explicit sync, autosync, and moving a project from git to the cloud."""
