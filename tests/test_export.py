"""Figure exports, the Figures page, and the link between figure cells and their exports."""

import re
from pathlib import Path

import jupytext
import matplotlib

matplotlib.use("Agg")  # tests only; chapters keep the default backend
import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

from rankcollapse_book.export import save_figure  # noqa: E402
from rankcollapse_book.figures_page import collect, write_figures_page  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FACTS = {"profile": "ci", "seed": "0", "git commit": "abc1234", "rankcollapse": "0.1.0"}


def test_save_figure_writes_all_formats_with_provenance(tmp_path):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 2])
    save_figure(fig, "fig-test", pd.DataFrame({"x": [0, 1], "y": [1, 2]}), tmp_path, FACTS)
    plt.close(fig)
    for fmt in ("png", "svg", "pdf", "csv"):
        assert (tmp_path / f"fig-test.{fmt}").stat().st_size > 0
    assert "abc1234" in Image.open(tmp_path / "fig-test.png").info["Description"]
    assert "abc1234" in (tmp_path / "fig-test.svg").read_text()
    assert b"abc1234" in (tmp_path / "fig-test.pdf").read_bytes()
    csv = pd.read_csv(tmp_path / "fig-test.csv", comment="#")
    assert list(csv.columns) == ["x", "y"] and len(csv) == 2
    assert "# git commit: abc1234" in (tmp_path / "fig-test.csv").read_text()
    assert not list(tmp_path.glob("*.tmp"))
    with pytest.raises(ValueError, match="fig-"):
        save_figure(plt.figure(), "pure", pd.DataFrame(), tmp_path, FACTS)


def test_every_named_figure_cell_exports_under_the_same_name():
    """The name in the cell metadata and the one passed to chapter.show must agree."""
    for source in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py")):
        for cell in jupytext.read(source).cells:
            name = cell.metadata.get("mystnb", {}).get("figure", {}).get("name")
            if name:
                shown = re.findall(r'chapter\.show\(.*?"(fig-[\w-]+)"', cell.source, re.S)
                assert shown == [name], (source.name, name)


def test_figures_page_lists_figures_with_downloads_and_citations(tmp_path):
    chapters = tmp_path / "book" / "chapters"
    chapters.mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# A chapter\n\ntext"),
        nbformat.v4.new_code_cell("x", metadata={"mystnb": {"figure": {
            "name": "fig-a", "caption": "Residual $r$ against depth. More text."}}})])
    nbformat.write(nb, chapters / "01_a.ipynb")
    (tmp_path / "_config.yml").write_text("html:\n  baseurl: https://example.org/book/\n")
    page = write_figures_page(tmp_path, chapters, ["book/intro", "book/chapters/01_a"])
    text = page.read_text()
    assert [f.name for f in collect(chapters, ["book/chapters/01_a"])] == ["fig-a"]
    assert "### fig-a" in text and "{numref}`fig-a`" in text
    for fmt in ("png", "svg", "pdf", "csv"):
        assert f'href="../figures/fig-a.{fmt}"' in text
    assert "https://example.org/book/book/chapters/01_a.html#fig-a" in text
    assert "@misc{rankcollapse-fig-a" in text and "title        = {Residual r against depth}" in text
    # without a public address: the path in the book and the commit from the caption
    (tmp_path / "_config.yml").write_text("html:\n  baseurl: ''\n")
    nb.cells[1].metadata["mystnb"]["figure"]["caption"] += " (Computed at commit abc1234, profile ci.)"
    nbformat.write(nb, chapters / "01_a.ipynb")
    local = write_figures_page(tmp_path, chapters, ["book/chapters/01_a"]).read_text()
    assert "book/chapters/01_a.html#fig-a (commit abc1234)" in local and "https://" not in local


def glue_output(name: str, mime: str, value: str) -> nbformat.NotebookNode:
    """A `myst_nb.glue(name, value, display=False)` output as an executed notebook holds it."""
    prefix = "application/papermill.record/"
    return nbformat.v4.new_output("display_data", data={prefix + mime: value},
                                  metadata={"scrapbook": {"name": name, "mime_prefix": prefix}})


def test_the_figures_page_pastes_what_a_caption_glues(tmp_path):
    """A caption that glues a run's values reads the same on the Figures page, where no glue
    reaches: the values are pasted as the chapter pastes them; an unknown name is refused."""
    chapters = tmp_path / "book" / "chapters"
    chapters.mkdir(parents=True)
    caption = ("Ratio at logit scale {glue:text}`scale:g`, simultaneous {glue:text}`level:.0%` "
               "intervals; dotted: {glue:md}`tolerance:myst`. More.")
    glued = nbformat.v4.new_code_cell("glue", outputs=[
        glue_output("scale", "text/plain", "2.0"), glue_output("level", "text/plain", "0.95"),
        glue_output("tolerance", "text/markdown", "$10^{-6}$")])
    figure = nbformat.v4.new_code_cell("x", metadata={"mystnb": {"figure": {
        "name": "fig-a", "caption": caption}}})
    nbformat.write(nbformat.v4.new_notebook(cells=[figure, glued]), chapters / "01_a.ipynb")
    [fig] = collect(chapters, ["book/chapters/01_a"])
    assert fig.caption == ("Ratio at logit scale 2, simultaneous 95% intervals; dotted: "
                           "$10^{-6}$. More.")
    text = write_figures_page(tmp_path, chapters, ["book/chapters/01_a"]).read_text()
    assert "{glue" not in text and "title        = {Ratio at logit scale 2, simultaneous" in text
    figure.metadata["mystnb"]["figure"]["caption"] += " At {glue:text}`missing`."
    nbformat.write(nbformat.v4.new_notebook(cells=[figure, glued]), chapters / "01_a.ipynb")
    with pytest.raises(ValueError, match="fig-a.*'missing'"):
        collect(chapters, ["book/chapters/01_a"])
