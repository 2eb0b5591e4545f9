"""Multi-agent PPO with per-agent memory on PettingZoo Parallel tasks (``algo: mappo``)."""
