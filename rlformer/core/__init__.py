"""The memory-enabled attention core shared by both learners.

Nothing here knows about PPO, returns or Ray: tokens in, tokens and memory out.
"""

from rlformer.core.config import CoreConfig
from rlformer.core.memory import Memory
from rlformer.core.stack import CoreOutput, MemoryCore

__all__ = ["CoreConfig", "CoreOutput", "Memory", "MemoryCore"]
