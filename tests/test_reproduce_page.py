"""The profile table in book/reproduce.md must state the sizes that profiles.py defines."""

import re
from dataclasses import fields
from pathlib import Path

from rankcollapse.profiles import PROFILES, Profile

PAGE = Path(__file__).resolve().parents[1] / "book" / "reproduce.md"


def test_profile_table_matches_profiles():
    table = {m[1]: m[2].split(" | ") for m in re.finditer(r"\(`(\w+)`\) \| (.+) \|", PAGE.read_text())}
    scalars = [f for f in fields(Profile) if f.name != "name"
               and isinstance(getattr(PROFILES["ci"], f.name), int)]
    for field in scalars:
        stated = table[field.name]
        assert stated == [str(getattr(PROFILES[p], field.name)) for p in ("ci", "full")]
