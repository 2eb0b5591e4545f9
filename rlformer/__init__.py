"""rlformer: reinforcement-learning agents with Transformer memory.

GTrXL policies trained online with PPO and Decision Transformers trained offline, both on one
memory-enabled attention core (:mod:`rlformer.core`).
"""

__version__ = "0.1.0"
