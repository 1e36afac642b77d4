"""How one test reads in the ledger and the chapter boxes, for a test that could not be
carried out on a task (no window: C4b before/after collapse when the models never collapse)."""

from rankcollapse.verdicts import Result
from rankcollapse_book.outcomes import cells_of_test, found_words


def test_an_untested_statistical_test_reads_not_testable_with_its_reason():
    r = Result("trained models, by collapse", "MNIST digits", None, "undecided", "untested",
               note="no layer after collapse to half").record()
    said = found_words("C4b", r)
    assert said.endswith(": not testable here (no layer after collapse to half)")
    cells = cells_of_test("C4b", r)
    assert cells["outcome"] == "not testable here" and cells["units"] == "–"


def test_a_note_of_a_test_that_ran_is_said_after_what_it_found():
    r = Result("trained models, at matched residual level", "MNIST digits", 1.3, "more",
               "agrees", 1.1, 1.5, 0.98, (8,), 1.2, values=8, sd=(0.1,),
               note="a note").record()
    assert found_words("C4c", r).endswith(": higher (a note)")
    r["note"], r["left_out"] = "", "without skip: no layer before collapse"
    assert found_words("C4c", r).endswith(": higher (left out: without skip: no layer before "
                                          "collapse)")
