"""The Textual app: the transcript, the four ladder panels, keys, themes.

The UI renders the session's events and asks the agent to act; it never
changes the session itself.
"""
