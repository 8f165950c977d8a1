"""Native test servers: started on loopback ports with data under a temporary directory.

Each server class starts idempotently, waits (bounded) until it answers, and stops or is
killed on demand, so tests can take a store away and bring it back.
"""
