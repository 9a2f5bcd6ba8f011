"""hexlocal's command line: `hexlocal_cli.main:main` is the `hexlocal` console script."""
