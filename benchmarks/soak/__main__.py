"""``python -m benchmarks.soak``: see :mod:`benchmarks.soak.runner`."""

import sys

from benchmarks.soak.runner import main

sys.exit(main())
