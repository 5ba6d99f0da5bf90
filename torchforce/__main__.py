"""``python -m torchforce`` is ``tfcli``."""

import sys

from torchforce.client.cli import main

sys.exit(main())
