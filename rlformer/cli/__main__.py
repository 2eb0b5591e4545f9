"""``python -m rlformer.cli``: the ``rlformer`` command."""

from rlformer.cli import main

if __name__ == "__main__":
    main()
