"""The ladder's rungs, least destructive first.

1. truncate — cap content at the source (the tools do it; `truncate` caps text).
2. spill    — write a big result to the spill store, leave a pointer.
3. delegate — a sub-session's final answer only (agent layer; kind delegate_result).
4. pointer  — remember/recall artifacts (agent layer; kind memory_pointer).
5. fold     — replace the oldest unpinned span by a summary, guarding its facts.
"""
