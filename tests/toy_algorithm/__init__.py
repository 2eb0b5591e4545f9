"""An algorithm that exists only in the tests: a linear policy found by hill climbing.

It is added the way a separate package adds one (an ``rlformer.algorithms`` entry point naming
its declaration) and touches no file of the library: its own config section, checkpoint kind,
policy and export step. It shares nothing with PPO but the protocols.
"""
