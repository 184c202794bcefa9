"""The MCP face: the stdio server, its tools, the agents' instructions and agent set-up."""
