"""hexlocal's MCP face: tool schemas and descriptions, argument checks, formatting.

All behaviour lives in `hexlocal_core.service`; `server.create_server` wires the tools to
it and `command.main` (the `hexlocal-mcp` command) runs them over stdio or HTTP. Nothing
here is imported eagerly, so `import hexlocal_mcp` stays cheap.
"""
