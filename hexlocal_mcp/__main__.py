"""`python -m hexlocal_mcp`: the same server as the `hexlocal-mcp` console script."""

from hexlocal_mcp.server import main

if __name__ == "__main__":
    main()
