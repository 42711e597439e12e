"""The bench: the policies run through a trace, measured (runner.py); the traces are scenarios/ data."""
