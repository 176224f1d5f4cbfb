"""`verify`'s comparison of two executions of a page (`headlib.book.verification.compare_page`), on
hand-built notebooks: values compare at the precision the book prints them, timings not at all."""
import nbformat

from headlib.book.glue_refs import GLUE_MIME_PREFIX
from headlib.book.verification import compare_page


def _page(path, values: dict[str, str]):
    """A notebook gluing each of `values` (key -> its text/plain repr), as myst_nb.glue(display=False) does."""
    outputs = [nbformat.v4.new_output("display_data", data={GLUE_MIME_PREFIX + "text/plain": text},
                                      metadata={"scrapbook": {"name": key}}) for key, text in values.items()]
    cell = nbformat.v4.new_code_cell("", outputs=outputs)
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), str(path))
    return path


def test_values_compare_as_printed_and_timings_are_not_compared(tmp_path):
    old = _page(tmp_path / "old.ipynb", {"cited": "0.123449", "uncited": "0.03407498449087141", "bare": "0.5",
                                         "claims-done": "<table>0.3</table>", "page-lrp-seconds": "12.0"})
    new = _page(tmp_path / "new.ipynb", {"cited": "0.123451", "uncited": "0.034074984490871374", "bare": "0.5000001",
                                         "claims-done": "<table>0.2</table>", "page-lrp-seconds": "13.5"})
    check = compare_page(old, new, {"cited": {".2f"}}, "p", cited_keys=frozenset({"cited", "bare"}))
    # "cited" prints 0.12 both times; "uncited" is printed nowhere and agrees to 6 significant digits;
    # "bare" is cited without a format, so printed as its repr, which differs
    assert check.differing == ["bare"] and check.values == 3 and check.equal == 2 and check.timings == 2
    assert abs(check.largest - 2e-6) < 1e-12                  # the largest difference: 0.123451 - 0.123449
    again = compare_page(old, new, {"cited": {".6f"}}, "p", cited_keys=frozenset({"cited", "bare"}))
    assert again.differing == ["cited", "bare"]               # printed 0.123449 and 0.123451
