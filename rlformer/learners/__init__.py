"""Learners: pure losses and ``update(batch) -> metrics`` objects (GAE, PPO)."""
