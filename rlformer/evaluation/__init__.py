"""Running trained policies for evaluation and summarising the results."""
