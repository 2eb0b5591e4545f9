"""Networks built on the attention core: the GTrXL actor-critic (and later the Decision Transformer)."""
