"""What the report says of prompts that reached the server with another length.

Random prompts are fitted by the model's tokenizer to exactly their `input_len`
(bench/tokenizer.py); each measured round's record counts the requests whose
`usage.prompt_tokens` differs (`prompt_lengths`). A note names the cells that have
any: their server tokenized the prompts otherwise than the client's tokenizer did.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from stackmatrix.records import LaunchRecord, RoundRecord
from stackmatrix.records._read import JSONObject
from stackmatrix.report.load import CellResults


def prompt_length_notes(cells: Sequence[CellResults]) -> list[str]:
    """A note per cell with measured requests of another prompt length than input_len."""
    out = []
    for cell in cells:
        checks = [c for launch in cell.bench.launches for c in _checks(launch)]
        if note := _note(cell.id, checks):
            out.append(note)
    return out


def _checks(launch: LaunchRecord) -> Iterator[JSONObject]:
    rounds: list[RoundRecord] = list(launch.rounds)
    for point in (launch.points or {}).values():
        rounds += point.rounds
    for r in rounds:
        check = r.extra.get("prompt_lengths")
        if isinstance(check, dict):
            yield check


def _note(cell: str, checks: Sequence[JSONObject]) -> str | None:
    bad = [c for c in checks if _count(c, "mismatched") > 0]
    if not bad:
        return None
    mismatched = sum(_count(c, "mismatched") for c in checks)
    checked = sum(_count(c, "checked") for c in checks)
    first = bad[0].get("first")
    example = ""
    if isinstance(first, dict):
        example = (
            f"; request {first.get('index')}: input_len {first.get('input_len')}, "
            f"the server counted {first.get('prompt_tokens')}"
        )
    return (
        f"{cell}: {mismatched} of {checked} measured requests, in {len(bad)} of "
        f"{len(checks)} rounds, reached the server with another prompt length than their "
        f"input_len (usage.prompt_tokens{example}): its tokenizer is not the client's "
        "(bench.tokenizer names the client's), or it adds tokens of its own"
    )


def _count(check: JSONObject, key: str) -> int:
    value = check.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
