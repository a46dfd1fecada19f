"""Entry point: the `flowforge` command line."""
