"""The phases a ticket moves through: baton.registry.model.Phase's values, for the writes
that build events without pydantic and for the front ends that offer them (tests/test_outages.py
pins them to the model)."""

PHASES = ("planning", "implementing", "reviewing", "merging", "deploying", "completed", "stalled")
# The phases `update --phase` offers: a ticket stalls through `end --status stalled`.
UPDATE_PHASES = PHASES[:-1]
