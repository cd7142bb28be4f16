"""The `agents` command line: one root Typer app, one module per group of commands."""
