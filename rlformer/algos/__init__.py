"""Training algorithms, one package each: ``rlformer.algos.<name>`` holds its config section and
declaration (``config.py``), the algorithm the run loop drives (``algorithm.py``), its
learner(s) and data-parallel part, its policy (acting and loading) and its export step.

Generic code never imports these packages: it reaches an algorithm through its declaration
(:class:`~rlformer.config.sections.spec.AlgorithmSpec`), registered by an entry point
(:mod:`rlformer.config.sections.registry`).
"""
