"""Archiving a revert's artifacts: bounded, sparse-keeping, durable, time-bounded copies."""
