import sys

from deeplite_like.cli import main

sys.exit(main())
