"""``python3 -m console.demo.engine`` (the zipapp's own ``__main__`` starts the same main)."""

import sys

from .cli import main

# Guarded so that importing every module of the package (the packaging hygiene test) runs nothing.
if __name__ == "__main__":
    sys.exit(main())
