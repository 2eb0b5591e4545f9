"""Export: a trained policy as an ONNX (or ``torch.export``) graph with a ``policy.json`` that
a runner without rlformer can follow, and the runner that loads it back as a policy."""
