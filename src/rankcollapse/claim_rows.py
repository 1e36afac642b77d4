"""What a chapter records about a claim: its results, the verdict they give by the
registered rule, and the finding in words (`Claim`); the bullets of a chapter's summary box
(`claims_markdown`)."""

from __future__ import annotations

from dataclasses import dataclass

from .registry import CLAIMS, FINDINGS, decide, registered
from .verdicts import (CLAIM_RULE, CLAIM_VERDICTS, COMPARISON_RULE, FINDING_RULE,
                       FINDING_VERDICTS, TREND_VERDICTS, Result)


@dataclass(frozen=True)
class Claim:
    """What a chapter records about one claim or some of its parts: its `results`, the
    verdict they give (`decide`), the finding in words generated from the run's numbers,
    the figure that shows it and the data it was computed on. The claims ledger merges the
    results of every part of a claim and decides it again with the same rule."""

    id: str
    verdict: str
    finding: str
    results: tuple[Result, ...] = ()
    figure: str | None = None
    data: str | None = None

    def __post_init__(self):
        entry = registered(self.id)
        for part in dict.fromkeys(r.part for r in self.results):
            entry.part(part)  # a misspelt part name: a ValueError naming the parts
        valid = (TREND_VERDICTS if entry.rule == "trend" else
                 FINDING_VERDICTS if entry.finding else CLAIM_VERDICTS)
        if self.verdict not in valid:
            raise ValueError(f"unknown verdict {self.verdict!r} for {self.id}; valid: "
                             f"{', '.join(valid)}")

    @classmethod
    def of(cls, claim_id: str, results: list[Result], finding: str, figure: str | None = None,
           data: str | None = None) -> Claim:
        """The claim decided from `results` by its registered rule."""
        return cls(claim_id, decide(claim_id, results), finding, tuple(results), figure, data)

    @property
    def claim(self) -> str:
        return CLAIMS[self.id].claim

    def record(self) -> dict:
        """The claim as a plain dict (for the claims ledger and claims.json)."""
        return {"id": self.id, "claim": self.claim, "verdict": self.verdict,
                "finding": self.finding, "results": [r.record() for r in self.results],
                "figure": self.figure, "data": self.data}

    def markdown(self) -> str:
        """The claim as a bullet; a claim of several parts names those tested here and,
        when some are tested elsewhere, says that its verdict here is for these parts."""
        parts = list(dict.fromkeys(r.part for r in self.results))
        registered = [p.name for p in CLAIMS[self.id].parts]
        which = ""
        if len(registered) > 1 and parts:
            rest = [p for p in registered if p not in parts]
            which = (f" (tested here: {'; '.join(parts)}; " + ELSEWHERE.format(
                parts="; ".join(rest)) + ")" if rest else f" ({'; '.join(parts)})")
        return f"- **{self.id}** {self.claim}{which}: **{self.verdict}**. {self.finding}"


ELSEWHERE = "the claims ledger decides the claim with {parts} too"


def claims_markdown(claims: list[Claim]) -> str:
    """A bullet list of claims for a chapter's summary box, followed by the rules (the
    finding rule for the open questions)."""
    rules = ([CLAIM_RULE] if any(c.id not in FINDINGS for c in claims) else []) + \
        ([FINDING_RULE] if any(c.id in FINDINGS for c in claims) else [])
    return "\n".join(c.markdown() for c in claims) + f"\n\n{COMPARISON_RULE} " + " ".join(rules)
