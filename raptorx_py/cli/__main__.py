"""``python -m raptorx_py.cli``: the ``raptorx`` command."""

import sys

from raptorx_py.cli import main

sys.exit(main())
