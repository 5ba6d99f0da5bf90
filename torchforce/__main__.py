"""``python -m torchforce`` is ``tfcli``."""

import os
import sys

# ``python -m`` puts the current folder first on the path: a project's own ``tqdm.py`` would shadow the real one.
# Imports come from what is installed (and a project's ``modules/`` folder, added explicitly), as with ``tfcli``.
if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from torchforce.client.cli import main  # noqa: E402

sys.exit(main())
