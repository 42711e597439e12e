"""Widgets: one small widget per file, styles beside it."""
