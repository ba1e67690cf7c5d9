"""``python -m framework.app APP_DIR``: see ``framework.app._main``."""

import sys

from ._main import main

sys.exit(main())
