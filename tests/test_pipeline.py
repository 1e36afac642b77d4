"""The book pipeline (rankcollapse_book.pipeline) on small fixture chapters in a temporary project.

These tests start real Jupyter kernels (about 2 s each), so there are only a few of them.
"""

import json
import shutil
import sys
from pathlib import Path

import nbformat
import pytest

from rankcollapse_book.chapter import TIME_PLACEHOLDER
from rankcollapse_book.pipeline import Project, cache_key, finalize, main, run
from rankcollapse_book.site import build

FIXTURES = Path(__file__).parent / "fixtures"
PARAMETERS = {"profile": "ci", "device": "cpu", "seed": 7}


def make_project(tmp_path: Path, **chapters: str) -> Project:
    """A project in `tmp_path` whose notebooks/<name>.py are copies of fixtures/<fixture>.py."""
    (tmp_path / "notebooks").mkdir()
    for name, fixture in chapters.items():
        shutil.copy(FIXTURES / f"{fixture}.py", tmp_path / "notebooks" / f"{name}.py")
    return Project(tmp_path)


def outputs_text(notebook: Path) -> str:
    """All stream output of an executed notebook, concatenated."""
    cells = nbformat.read(notebook, as_version=4).cells
    return "".join(o.get("text", "") for c in cells for o in c.get("outputs", []))


def test_passing_chapter_executes_with_injected_parameters(tmp_path):
    project = make_project(tmp_path, **{"01_pass": "passing"})
    assert main(["run", "--seed", "7", "--device", "cpu"], project) == 0
    output = project.output("01_pass")
    injected = [c for c in nbformat.read(output, as_version=4).cells
                if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1 and "seed = 7" in injected[0].source
    # The kernel must run this interpreter, i.e. see the packages of this environment.
    assert f"profile=ci device=cpu seed=7 python={sys.executable}" in outputs_text(output)
    assert json.loads(project.record("01_pass").read_text())["parameters"] == PARAMETERS


def test_cache_hit_then_miss_after_editing_the_chapter(tmp_path):
    project = make_project(tmp_path, **{"01_pass": "passing"})
    assert run(project, ["01_pass"], PARAMETERS)[0].status == "ok"
    assert run(project, ["01_pass"], PARAMETERS)[0].status == "cached"
    with project.source("01_pass").open("a") as source:
        source.write("\n# %%\nprint('edited')\n")
    assert run(project, ["01_pass"], PARAMETERS)[0].status == "ok"
    assert "edited" in outputs_text(project.output("01_pass"))
    project.record("01_pass").write_text('{"key": "trunc')  # a record cut short by a crash
    assert run(project, ["01_pass"], PARAMETERS)[0].status == "ok"  # runs again, no crash


def test_a_truncated_executed_notebook_is_executed_again(tmp_path):
    """The cache record is intact but the notebook it stands for was cut short (a crash, a
    full disk): the notebook's digest no longer matches, so the chapter runs again instead
    of crashing with a NotJSONError that names no file."""
    project = make_project(tmp_path, **{"01_pass": "passing"})
    assert run(project, ["01_pass"], PARAMETERS)[0].status == "ok"
    output = project.output("01_pass")
    output.write_bytes(output.read_bytes()[:100])
    assert run(project, ["01_pass"], PARAMETERS)[0].status == "ok"
    assert nbformat.read(output, as_version=4).cells
    assert run(project, ["01_pass"], PARAMETERS)[0].status == "cached"


def test_a_folder_without_chapters_is_refused(tmp_path, capsys):
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: intro\n")
    (tmp_path / "notebooks").mkdir()
    with pytest.raises(SystemExit) as stop:
        main(["run"], Project(tmp_path))
    assert stop.value.code == 2
    assert "no chapter sources" in capsys.readouterr().err


def test_failing_chapter_names_file_and_cell_and_stops(tmp_path, capsys):
    project = make_project(tmp_path, **{"01_fail": "failing", "02_pass": "passing"})
    assert main(["run"], project) == 1
    err = capsys.readouterr().err
    assert "notebooks/01_fail.py, line 7" in err
    assert 'raise ValueError("deliberate failure")' in err
    assert "ValueError: deliberate failure" in err
    assert project.output("01_fail").is_file()  # kept for inspection
    assert not project.record("01_fail").exists()
    assert not project.output("02_pass").exists()  # stopped at the first failure


@pytest.mark.parametrize("argv, valid", [
    (["run", "--profile", "huge"], "valid profiles: ci, full"),
    (["run", "--device", "tpu"], "valid devices: auto, cpu, cuda"),
    (["all", "99_nope"], "valid chapters: 01_pass"),
    (["run", "--seed", "-1"], "seed must be in [0, 2**32)"),
    (["run", "--seed", str(2**70)], "seed must be in [0, 2**32)"),
])
def test_bad_arguments_are_refused_before_execution(tmp_path, capsys, argv, valid):
    project = make_project(tmp_path, **{"01_pass": "passing"})
    with pytest.raises(SystemExit) as refused:
        main(argv, project)
    assert refused.value.code == 2
    assert valid in capsys.readouterr().err
    assert not project.chapters.exists()


def test_cache_key_covers_parameters_and_library(tmp_path):
    project = make_project(tmp_path, **{"01_pass": "passing"})
    key = cache_key(project, "01_pass", PARAMETERS)
    assert cache_key(project, "01_pass", {**PARAMETERS, "seed": 8}) != key
    library = tmp_path / "src" / "rankcollapse"
    library.mkdir(parents=True)
    (library / "extra.py").write_text("x = 1\n")
    with_science = cache_key(project, "01_pass", PARAMETERS)
    assert with_science != key


def test_cache_key_covers_every_source_that_can_change_a_number(tmp_path):
    """The C loops the engine compiles, and the stand-in datasets (package data), are part of
    the key as much as the modules; Python's bytecode caches are not."""
    project = make_project(tmp_path, **{"01_pass": "passing"})
    library = tmp_path / "src" / "rankcollapse"
    (library / "__pycache__").mkdir(parents=True)
    (library / "engine.py").write_text("run = 1\n")
    (library / "engine.c").write_text("int run;\n")
    standins = tmp_path / "data" / "digits"
    standins.mkdir(parents=True)
    (standins / "digits.npz").write_bytes(b"one")
    key = cache_key(project, "01_pass", PARAMETERS)
    (library / "__pycache__" / "engine.cpython-311.pyc").write_bytes(b"bytecode")
    assert cache_key(project, "01_pass", PARAMETERS) == key
    (library / "engine.c").write_text("int run = 2;\n")
    edited_c = cache_key(project, "01_pass", PARAMETERS)
    assert edited_c != key
    (standins / "digits.npz").write_bytes(b"two")
    assert cache_key(project, "01_pass", PARAMETERS) != edited_c


def test_cache_key_ignores_the_tooling_outside_the_chapter_kernel(tmp_path):
    """Editing the site check or the pipeline re-executes nothing; editing the chapter
    header (which runs inside every chapter) or what it imports does."""
    project = make_project(tmp_path, **{"01_pass": "passing"})
    tooling = tmp_path / "src" / "rankcollapse_book"
    tooling.mkdir(parents=True)
    (tooling / "chapter.py").write_text("from rankcollapse_book.export import save\n")
    (tooling / "export.py").write_text("save = 1\n")
    (tooling / "sitecheck.py").write_text("check = 1\n")
    key = cache_key(project, "01_pass", PARAMETERS)
    (tooling / "sitecheck.py").write_text("check = 2\n")
    (tooling / "pipeline.py").write_text("run = 2\n")
    assert cache_key(project, "01_pass", PARAMETERS) == key
    (tooling / "export.py").write_text("save = 2\n")
    assert cache_key(project, "01_pass", PARAMETERS) != key


def test_build_refuses_when_a_chapter_was_not_executed(tmp_path, capsys):
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nchapters:\n  - file: book/chapters/01_pass\n")
    (tmp_path / "intro.md").write_text("# Intro\n")
    assert build(Project(tmp_path)) == 1
    err = capsys.readouterr().err
    assert "book/chapters/01_pass" in err and "rankcollapse_book run" in err
    # A notebook left behind by a failed run (no cache record) is refused too.
    (tmp_path / "book" / "chapters").mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "book" / "chapters" / "01_pass.ipynb")
    assert build(Project(tmp_path)) == 1
    assert "not successfully executed" in capsys.readouterr().err


def test_finalize_fills_the_time_and_hides_parameter_cells(tmp_path):
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("profile = 'ci'", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("profile = 'full'", metadata={"tags": ["injected-parameters"]}),
        nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output(
            "display_data", data={"text/html": f"<b>{TIME_PLACEHOLDER}</b>"})])])
    path = tmp_path / "chapter.ipynb"
    nbformat.write(notebook, path)
    finalize(path, 42.06, {"profile": "ci", "device": "cpu", "seed": 0})
    cells = nbformat.read(path, as_version=4).cells
    assert cells[2].outputs[0].data["text/html"] == "<b>42.1 s</b>"
    assert all("remove-cell" in c.metadata["tags"] for c in cells[:2])
    assert "tags" not in cells[2].metadata or "remove-cell" not in cells[2].metadata["tags"]


def test_missing_figure_exports_defeat_the_cache(tmp_path):
    from rankcollapse_book.pipeline import missing_exports

    project = Project(tmp_path)
    project.chapters.mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "x", metadata={"mystnb": {"figure": {"name": "fig-x", "caption": "c"}}})])
    nbformat.write(nb, project.output("01_fig"))
    assert missing_exports(project, "01_fig") == [f"fig-x.{f}" for f in ("png", "svg", "pdf", "csv")]
    exports = project.chapters / "figures"
    exports.mkdir()
    for fmt in ("png", "svg", "pdf", "csv"):
        (exports / f"fig-x.{fmt}").write_text("x")
    assert missing_exports(project, "01_fig") == []


def test_build_config_puts_version_and_commit_in_every_page_footer(tmp_path, monkeypatch):
    """The generated config is `_config.yml` plus the footer, as jupyter-book reads it."""
    import subprocess

    from jupyter_book.config import get_final_config

    from rankcollapse import __version__
    from rankcollapse_book.site import BUILD_CONFIG, build_config

    def final_footer(root: Path) -> str:
        path = build_config(root)
        assert path == root / BUILD_CONFIG
        config, _ = get_final_config(user_yaml=path, cli_config={"latex_individualpages": False},
                                     sourcedir=root, raise_on_invalid=True)
        assert config["html_title"] == "A book"  # the rest of _config.yml is kept
        return config["html_theme_options"]["extra_footer"]

    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))  # no repository above
    (tmp_path / "_config.yml").write_text("title: A book\nrepository:\n  url: ''\n")
    assert final_footer(tmp_path) == (f'<p class="build-info">Version {__version__}, built from '
                                      f'commit unknown.</p>')  # not a git repository
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".gitignore").write_text("_build/\n")
    subprocess.run([*git, "add", "."], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "x"], cwd=tmp_path, check=True)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert f"Version {__version__}, built from commit <code>{sha[:7]}</code>." \
        in final_footer(tmp_path)
    (tmp_path / "_config.yml").write_text("title: A book\nrepository:\n"
                                          "  url: https://github.com/o/r\n")  # uncommitted
    assert (f'built from commit <a href="https://github.com/o/r/commit/{sha}">{sha[:7]}+dirty'
            f'</a>.') in final_footer(tmp_path)


def test_a_chapter_cache_that_cannot_be_written_ends_with_one_line(tmp_path, capsys):
    project = make_project(tmp_path, **{"01_pass": "passing"})
    (tmp_path / ".cache").write_text("")  # .cache/chapters cannot be made
    assert main(["run", "--device", "cpu"], project) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert ".cache" in err


# ----------------------------------------------------------------------------- what to fix


def book_project(tmp_path: Path, records: dict) -> Project:
    """A project whose `_toc.yml` lists the claims and Reproduce pages and one chapter per
    entry of `records` (chapter name -> its cache record, or None when it never ran), each
    with an executed notebook."""
    chapters = "".join(f"  - file: book/chapters/{name}\n" for name in records)
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n" + chapters
                                       + "  - file: book/claims\n  - file: book/reproduce\n")
    (tmp_path / "intro.md").write_text("# Intro\n")
    project = Project(tmp_path)
    project.chapters.mkdir(parents=True)
    project.cache.mkdir(parents=True)
    for name, record in records.items():
        nbformat.write(nbformat.v4.new_notebook(), project.output(name))
        if record is not None:
            project.record(name).write_text(json.dumps(record))
    return project


def record(profile: str = "ci", seconds=1.5) -> dict:
    return {"key": "k", "seconds": seconds, "notebook_sha256": "s",
            "parameters": {**PARAMETERS, "profile": profile}}


def one_line(capsys) -> str:
    """The command's stderr, which must be one line without a traceback."""
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def test_build_before_any_chapter_ran_says_what_to_run(tmp_path, capsys):
    """Once a traceback "unknown profile 'unknown'" from the claims page."""
    project = book_project(tmp_path, {"01_a": None, "02_b": None})
    assert main(["build"], project) == 1
    err = one_line(capsys)
    assert "book/chapters/01_a" in err and "book/chapters/02_b" in err
    assert "rankcollapse_book run 01_a 02_b" in err


def test_build_after_runs_under_two_profiles_says_what_to_run(tmp_path, capsys):
    """Once a traceback "unknown profile 'ci, smoke'": one book states one profile."""
    project = book_project(tmp_path, {"01_a": record("ci"), "02_b": record("smoke")})
    assert main(["build"], project) == 1
    err = one_line(capsys)
    assert "ci (01_a)" in err and "smoke (02_b)" in err
    assert "rankcollapse_book run --profile ci" in err


@pytest.mark.parametrize("toc", [b"format: jb-book\nroot: [intro\n", b"- just a list\n",
                                 b"root: intro\nchapters:\n  - file: 3\n",
                                 b"root: intro\n# caf\xe9\n"])
def test_an_invalid_toc_is_named_with_what_to_do(tmp_path, capsys, toc):
    project = book_project(tmp_path, {"01_a": record()})
    (tmp_path / "_toc.yml").write_bytes(toc)
    assert main(["build"], project) == 1
    assert f"{tmp_path / '_toc.yml'}" in one_line(capsys)


@pytest.mark.parametrize("bad", [{"seconds": "12"}, {"seconds": None}, {"seconds": float("nan")},
                                 {"parameters": {"profile": ["ci"]}}, {"parameters": None}])
def test_a_cache_record_with_bad_fields_counts_as_none(tmp_path, capsys, monkeypatch, bad):
    """`run` executes the chapter again (once a ValueError formatting the time), and `build`
    names the record and the command to run (once a TypeError adding up the times)."""
    from rankcollapse_book import pipeline
    from rankcollapse.files import sha256_file

    project = book_project(tmp_path, {"01_a": None})
    (tmp_path / "notebooks").mkdir()
    shutil.copy(FIXTURES / "passing.py", tmp_path / "notebooks" / "01_a.py")
    project.record("01_a").write_text(json.dumps(
        {**record(), "key": cache_key(project, "01_a", PARAMETERS),
         "notebook_sha256": sha256_file(project.output("01_a")), **bad}))
    assert main(["build"], project) == 1
    err = one_line(capsys)
    assert ".cache/chapters/01_a.json" in err and "rankcollapse_book run 01_a" in err
    executed = []
    monkeypatch.setattr(pipeline, "execute", lambda p, name, _: executed.append(name) or 2.0)
    assert pipeline.run_chapter(project, "01_a", PARAMETERS).status == "ok"
    assert executed == ["01_a"]


def test_a_chapter_source_that_is_not_utf8_is_named(tmp_path, capsys):
    project = make_project(tmp_path, **{"01_pass": "passing"})
    project.source("01_pass").write_bytes(b"# %%\nprint('caf\xe9')\n")  # Latin-1
    assert main(["run", "--device", "cpu"], project) == 1
    err = one_line(capsys)
    assert "notebooks/01_pass.py" in err and "UTF-8" in err
