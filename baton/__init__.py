"""Baton's shared kernel: identifiers, outcomes, errors, clock, file identity and the data home.

Every store package (registry, graph, recall, signals) and the skills that compose them
build on these; nothing here imports a store.
"""
