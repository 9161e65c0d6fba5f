"""``python -m truetrain.explorer ARGS``: the same as ``truetrain explorer ARGS``."""

import sys

from truetrain.cli import main

if __name__ == "__main__":
    main(["explorer", *sys.argv[1:]], prog_name="truetrain")
