"""`python -m headlib.book run|status|check|verify|build`: the book's command line (`cli`)."""
import sys

from headlib.book.cli import main

sys.exit(main())
