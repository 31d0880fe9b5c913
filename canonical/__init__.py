"""The contract every layer shares: time units (and, with them, the canonical schemas). Imports nothing of hetpool."""
