"""`python -m tests.fuzz --seconds 600 --seed N` (from the repository root): fuzz for a while."""

import sys

from .runner import main

sys.exit(main())
