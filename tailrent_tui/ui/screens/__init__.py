"""Screens: the fold inspector, the spill viewer, help, approval, recall."""
