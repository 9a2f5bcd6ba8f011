"""`python -m hexlocal_cli`: the same command as the `hexlocal` console script."""

from hexlocal_cli.main import main

if __name__ == "__main__":
    main()
