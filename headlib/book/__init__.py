"""The book's machinery, beside the research code (no research module imports it): the notebook
runner and its consistency check (`runner`, `python -m headlib.book`), glue references
(`glue_refs`), the browser check (`browse`), and `pages`: one module per page of the book with the
tables, values and figures its notebook shows, so that a notebook is prose, calls, plots and glue."""
