"""``python -m benchmarks``: see :mod:`benchmarks.runner`."""

import sys

from benchmarks.runner import main

sys.exit(main())
