"""CITATION.cff and .zenodo.json: valid, with the fields their formats require, and in step
with each other and with the package version in pyproject.toml."""

import datetime
import json
import tomllib
from pathlib import Path

import yaml

from rankcollapse import __version__

ROOT = Path(__file__).resolve().parents[1]


def cff() -> dict:
    return yaml.safe_load((ROOT / "CITATION.cff").read_text())


def test_citation_file_is_valid_and_current():
    citation = cff()
    for key in ("cff-version", "message", "title", "authors", "version", "date-released"):
        assert citation.get(key), f"CITATION.cff lacks {key}"
    assert citation["cff-version"].startswith("1.2")
    assert all("name" in a or "family-names" in a for a in citation["authors"])
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert str(citation["version"]) == pyproject == __version__
    released = citation["date-released"]  # YAML may read an unquoted date as a date
    assert isinstance(released, datetime.date) \
        or datetime.date.fromisoformat(released).isoformat() == released
    paper = citation["references"][0]
    assert "2604.07925" in paper["url"] and paper["authors"][0]["family-names"] == "Lapenna"


def test_zenodo_metadata_agrees_with_the_citation_file():
    """Zenodo reads .zenodo.json (not CITATION.cff) when a GitHub release is archived."""
    zenodo = json.loads((ROOT / ".zenodo.json").read_text())
    citation = cff()
    assert zenodo["title"] == citation["title"]
    assert zenodo["version"] == str(citation["version"])
    assert zenodo["upload_type"] == "software" and zenodo["license"] == "MIT"
    assert zenodo["description"].strip()
    assert [c["name"] for c in zenodo["creators"]] == [a["name"] for a in citation["authors"]]
    assert {"identifier": "arXiv:2604.07925", "relation": "isSupplementTo"}.items() \
        <= zenodo["related_identifiers"][0].items()
