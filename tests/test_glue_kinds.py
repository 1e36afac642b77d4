"""A sentence glued as Markdown (`chapter.glue_text`) must be shown with `{glue:md}`: under
`{glue:text}` the page prints the object's repr ('<IPython.core.display.Markdown object>').
Checked on the chapter sources, without executing them."""

import ast
import re
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
TEXT_REFERENCE = re.compile(r"\{glue:text\}`([A-Za-z0-9_]+)")


def markdown_glued(source: str) -> list[re.Pattern]:
    """A pattern for each name a `glue_text({...})` call glues: literal keys exactly,
    f-string keys with their replacement fields as wildcards."""
    patterns = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "glue_text" and node.args):
            continue
        argument = node.args[0]
        keys = argument.keys if isinstance(argument, ast.Dict) else \
            [argument.key] if isinstance(argument, ast.DictComp) else []
        for key in keys:
            if isinstance(key, ast.Constant):
                patterns.append(re.compile(re.escape(key.value)))
            elif isinstance(key, ast.JoinedStr):
                patterns.append(re.compile("".join(
                    re.escape(v.value) if isinstance(v, ast.Constant) else ".+"
                    for v in key.values)))
    return patterns


def misused(source: str) -> list[str]:
    glued = markdown_glued(source)
    return sorted({name for name in TEXT_REFERENCE.findall(source)
                   if any(p.fullmatch(name) for p in glued)})


def test_no_chapter_shows_a_markdown_sentence_with_glue_text():
    offenders = {p.name: misused(p.read_text()) for p in sorted(NOTEBOOKS.glob("*.py"))}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_check_finds_literal_and_fstring_keys():
    source = ('chapter.glue_text({"a_sentence": s})\n'
              'chapter.glue_text({f"b_{k}_verdict": v for k, v in x.items()})\n'
              'chapter.glue({"a_number": 1})\n'
              '# {glue:text}`a_sentence` {glue:text}`b_net0_verdict` {glue:text}`a_number:g`\n'
              '# {glue:md}`a_sentence`\n')
    assert misused(source) == ["a_sentence", "b_net0_verdict"]
