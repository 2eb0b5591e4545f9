"""The memory-enabled attention core shared by both learners.

Nothing here knows about PPO, returns or Ray: tokens in, tokens and memory out. The exports
load on first use (:mod:`rlformer.lazy`): ``rlformer.core.version`` and
``rlformer.core.device`` import without torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlformer.lazy import exports

if TYPE_CHECKING:
    from rlformer.core.config import CoreConfig
    from rlformer.core.memory import Memory
    from rlformer.core.stack import CoreOutput, MemoryCore

__all__ = ["CoreConfig", "CoreOutput", "Memory", "MemoryCore"]

__getattr__ = exports(
    __name__,
    {
        "CoreConfig": "rlformer.core.config",
        "CoreOutput": "rlformer.core.stack",
        "Memory": "rlformer.core.memory",
        "MemoryCore": "rlformer.core.stack",
    },
)
