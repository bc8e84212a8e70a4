"""``python -m benchmarks.scale``: see :mod:`benchmarks.scale.runner`."""

import sys

from benchmarks.scale.runner import main

sys.exit(main())
