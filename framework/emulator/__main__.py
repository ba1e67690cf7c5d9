"""``python -m framework.emulator``: the detached init (see ``_daemon``)."""

from ._daemon import main

main()
