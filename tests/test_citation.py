"""CITATION.cff: valid YAML with the fields the Citation File Format requires."""

from pathlib import Path

import yaml

from rankcollapse import __version__

ROOT = Path(__file__).resolve().parents[1]


def test_citation_file_is_valid_and_current():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    for key in ("cff-version", "message", "title", "authors"):
        assert cff.get(key), f"CITATION.cff lacks {key}"
    assert cff["cff-version"].startswith("1.2")
    assert all("name" in a or "family-names" in a for a in cff["authors"])
    assert cff["version"] == __version__
    paper = cff["references"][0]
    assert "2604.07925" in paper["url"] and paper["authors"][0]["family-names"] == "Lapenna"
