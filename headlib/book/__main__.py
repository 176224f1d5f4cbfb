"""`python -m headlib.book run|status|check|build`: the book runner's command line."""
import sys

from headlib.book.runner import main

sys.exit(main())
