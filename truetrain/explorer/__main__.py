"""``python -m truetrain.explorer``: the same as ``truetrain explorer``."""

from truetrain.explorer.cli import explorer

if __name__ == "__main__":
    explorer(prog_name="truetrain explorer")
