"""The agent: one turn of the loop, the tools, and the ladder applied to what they return."""
