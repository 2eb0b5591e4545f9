"""Experience collection: rollout workers and collectors (local or Ray), one Fragment vocabulary."""
