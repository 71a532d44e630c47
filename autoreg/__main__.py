"""``python -m autoreg``: the command line (``autoreg._cli``)."""

import sys

from ._cli import main

if __name__ == "__main__":
    sys.exit(main())
