"""The sections of the run config, one module each, and the declarations that assemble them.

Shared sections, which any algorithm may read: ``run``, ``env``, ``rollout``, ``model``,
``eval`` and ``learner`` (:mod:`.shared` lists them). Each algorithm's own section lives in the
module of its name (:mod:`.ppo`, :mod:`.dt`, :mod:`.odt`) together with its declaration
(:class:`.spec.AlgoConfigSpec`): which shared sections it reads and why it ignores the others.
:mod:`.registry` lists the algorithms and says how to add one; :mod:`rlformer.config` assembles
the run config from them.

These modules import pydantic and :mod:`rlformer.core.config` only, never an algorithm's code
(:mod:`rlformer.algos`): nearly every module imports the config, and the algorithms import it.
"""
