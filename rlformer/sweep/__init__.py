"""Sweeps: seeds x variants x tasks of ordinary rlformer runs, executed as Ray Tune trials.

``spec`` reads and validates a sweep file and expands it into trials (every trial's config is
validated before any trial starts); ``runner`` hands the trials to a Ray Tune ``Tuner`` and
resumes a killed sweep; ``report`` turns the trials' run directories into one table and plots.
"""
