"""``python -m kinesis_spout.cli``: the same as the ``kinesis-spout`` command."""

import sys

from kinesis_spout.cli import main

sys.exit(main())
