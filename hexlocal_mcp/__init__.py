"""hexlocal's MCP face: tool schemas and descriptions, argument checks, formatting.

All behaviour lives in `hexlocal_core.service`; `server.create_server` wires the tools to
it and `server.main` runs them over stdio. Nothing here is imported eagerly, so
`import hexlocal_mcp` stays cheap.
"""
