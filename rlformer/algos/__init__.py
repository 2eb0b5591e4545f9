"""Training algorithms: ``rlformer.algos.<name>`` holds ``ALGORITHM`` (:mod:`.base`); the part of
the run config each one reads is declared in ``rlformer.config_sections.<name>``."""
