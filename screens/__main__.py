import sys

from screens.main import main

sys.exit(main())
