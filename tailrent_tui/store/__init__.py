"""Storage for sessions: journal (append-only JSONL), spill files, fold archive, memory, paths.

Everything here is plain files under the data directory. Nothing already saved
is ever rewritten in place: the journal is appended to, and every other file
is written to a temporary name, fsynced, and renamed over its target.
"""
