"""Networks built on the attention core: the GTrXL actor-critic and the Decision Transformer."""
