import sys

from archgap.cli import main

sys.exit(main())
