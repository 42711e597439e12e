"""tailrent: a terminal coding-agent shell that makes the context ladder visible.

The five rungs — truncate, spill, delegate, pointers, fold — keep what matters out
of the foldable pool and make every fold's losses visible.
"""

__version__ = "0.1.0"
