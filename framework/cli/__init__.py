"""The `npuemu` command line."""

from ._main import main as main
