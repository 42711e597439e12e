"""Scenarios: the article's run, its trace, and other built-in traces."""
