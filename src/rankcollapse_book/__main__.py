"""`python -m rankcollapse_book ...` is the `rankcollapse-book` command (see `pipeline`)."""

import sys

from rankcollapse_book.pipeline import main

sys.exit(main())
