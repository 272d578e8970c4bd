"""The ``plangate`` command line (typer + rich).

Interfaces only: every command calls an engine or a service and prints what it returns.
"""
