import sys

from audiorepro.cli import main

sys.exit(main())
