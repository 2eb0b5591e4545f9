"""The shared sections of the run config, one module each, and the algorithm declarations that
assemble it.

Shared sections, which any algorithm may read: ``run``, ``env``, ``rollout``, ``model``,
``eval`` and ``learner`` (:mod:`.shared` lists them). Each algorithm's own section lives in its
package (``rlformer/algos/<name>/config.py``) together with its declaration
(:class:`.spec.AlgorithmSpec`): which shared sections it reads and why it ignores the others.
:mod:`.registry` finds the algorithms and says how to add one; :mod:`rlformer.config` assembles
the run config from them.

These modules import pydantic and :mod:`rlformer.core.config` only, never an algorithm's code:
nearly every module imports the config, and the algorithms import it.
"""
