"""``python3 -m console.demo.engine`` (the zipapp's own ``__main__`` starts the same main)."""

import sys

from .cli import main

sys.exit(main())
