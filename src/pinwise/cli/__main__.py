"""python -m pinwise.cli"""

import sys

from . import main

sys.exit(main(command=True))
