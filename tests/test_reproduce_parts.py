"""The Reproduce page's generated tables: every profile setting and chapter 5's tasks come
from `rankcollapse.profiles`, the times from the run records."""

from dataclasses import fields, replace

from rankcollapse.profiles import PROFILES, Profile
from rankcollapse_book.reproduce_page import (CHAPTER_SETTINGS, LABELS, profiles_table,
                                              setting_names, times_table, write_reproduce_parts)


def book_profiles() -> dict[str, Profile]:
    """The profiles the book's page lists: not the tests' own three-task profile."""
    return {name: p for name, p in PROFILES.items() if name != "three-task"}


def test_every_setting_and_every_task_is_in_the_table():
    table = profiles_table(book_profiles())
    chapters = {f"{f.name}.{g.name}" for f in fields(Profile) if f.name in CHAPTER_SETTINGS
                for g in fields(CHAPTER_SETTINGS[f.name])}
    top = {f.name for f in fields(Profile)} - {"name", "tasks"} - set(CHAPTER_SETTINGS)
    assert set(setting_names()) == top | chapters
    assert set(LABELS) == top | {name.split(".")[-1] for name in chapters}
    for name in setting_names():
        assert f"(`{name}`)" in table
    assert "| 13 values, 10^-4 to 10^0 |" in table  # a LogGrid, in words
    assert "| `mnist` at 3, 6, 12, 24 layers, seeds 0, 1, 2, 3, 4 |" in table  # a DepthSweep
    ci, full = PROFILES["ci"], PROFILES["full"]
    assert f"| {', '.join(map(str, ci.train_seeds))} | {', '.join(map(str, full.train_seeds))} |" in table
    for role, task in ci.tasks.items():
        assert f"(`{role}`): dataset | `{task.dataset}` | `{full.tasks[role].dataset}` |" in table
        assert f"| {task.depth}, {task.d_model}, {task.n_heads}, {task.d_ff} |" in table


def test_the_table_follows_the_profiles():
    changed = {"ci": replace(PROFILES["ci"], n_eval=7)}
    assert "| test inputs analysed per trained model (chapters 5, 6) (`n_eval`) | 7 |" in \
        profiles_table(changed)


def test_times_come_from_the_records(tmp_path):
    records = {"a": {"seconds": 90.0, "parameters": {"profile": "ci", "device": "cpu"}},
               "b": {"seconds": 30.0, "parameters": {"profile": "ci", "device": "cpu"}},
               "c": None}
    table = times_table(records)
    assert "| a | 90 s | `ci` | cpu |" in table and "| c | not executed |" in table
    assert "**2.0 min**" in table
    write_reproduce_parts(tmp_path, records)
    assert (tmp_path / "book" / "times.md").read_text() == table
    assert (tmp_path / "book" / "profiles.md").read_text() == profiles_table()


def test_the_reproduce_page_includes_both_parts():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "book" / "reproduce.md").read_text()
    assert "```{include} profiles.md" in page and "```{include} times.md" in page
    assert "| setting |" not in page  # no hand-written copy left to drift
