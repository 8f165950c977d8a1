"""The skills agents and leads use: bind, touch, decide, update, end, resume, list.

Each skill composes the store interfaces; the CLI (baton.skills.frontends.cli) is a thin shell over them.
"""
