"""hexlocal core: the engine (no MCP, no CLI, no printing)."""
