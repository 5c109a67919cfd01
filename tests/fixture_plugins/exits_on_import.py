"""A hostile plugin that tries to end the process while being imported."""

import sys

sys.exit(9)
