"""What both halves share, standard library only: the protocol (framing and messages),
the session files that say where a job listens, and the condition grammar.

Nothing here imports torch, the agent, the client or a UI library (checked by
import-linter in CI).
"""
