"""Work shared out over worker processes: the same results as one after another, errors
raised where the work was asked for."""

import math
import operator

import pytest

from rankcollapse import workers


def test_side_by_side_returns_what_one_after_another_returns_under_each_name():
    calls = {"sum": (operator.add, (2, 3)), "power": (pow, (2, 10)),
             "root": (math.sqrt, (2.0,))}
    assert workers.side_by_side(calls, 2) == workers.side_by_side(calls, 1) == \
        {"sum": 5, "power": 1024, "root": math.sqrt(2.0)}


def test_a_failing_call_raises_its_error_here():
    with pytest.raises(ValueError, match="math domain error"):
        workers.side_by_side({"fine": (abs, (-1,)), "bad": (math.sqrt, (-1.0,))}, 2)


def test_threads_are_shared_out_and_a_pool_needs_a_worker():
    assert workers.threads_per_job(1) >= workers.threads_per_job(2) >= 1
    with pytest.raises(ValueError, match="at least 1"):
        workers.pool(0)
