"""The runnable configs, installed with rlformer as ``rlformer_configs`` so that a config is
found by name without a checkout: ``rlformer train quickstart``."""
