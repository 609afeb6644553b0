"""What the report says of prompts that reached the server with another length.

Random prompts are fitted by the model's tokenizer to exactly their `input_len`
(bench/tokenizer.py); each measured round's record counts the requests whose
`usage.prompt_tokens` differs (`prompt_lengths`). A note names the cells that have
any: their server tokenized the prompts otherwise than the client's tokenizer did.
Prompts sent as token ids (`bench.workload.prompt_form`, RUN/workload.json's
`prompt_lengths.sent_as`) get a note of their own: what a reader compares the figures
with depends on it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from stackmatrix import _nofollow, layout
from stackmatrix.errors import Unreadable
from stackmatrix.jsontypes import JSONObject
from stackmatrix.records import LaunchRecord, RoundRecord
from stackmatrix.report.load import CellResults


def prompt_form_note(run_dir: Path, cells: Sequence[CellResults]) -> list[str]:
    """A note where the prompts were sent as token ids, with how many measured requests
    the servers counted at exactly their input_len; none for text (or no workload.json)."""
    try:
        info = _nofollow.read_json(run_dir / layout.WORKLOAD_JSON)
    except (Unreadable, OSError):
        return []
    made = info.get("prompt_lengths") if isinstance(info, dict) else None
    sent = made.get("sent_as") if isinstance(made, dict) else None
    if not isinstance(sent, str) or "token_ids" not in sent:
        return []
    checks = [c for cell in cells for launch in cell.bench.launches for c in _checks(launch)]
    checked = sum(_count(c, "checked") for c in checks)
    exact = checked - sum(_count(c, "mismatched") for c in checks)
    which = "the prompts" if sent == "token_ids" else "some load points' prompts"
    return [
        f"{which[0].upper()}{which[1:]} were sent as the client tokenizer's token ids "
        '(bench.workload.prompt_form = "token_ids"), which reach the engine\'s scheduler '
        "without its tokenizer: the figures leave out the server's tokenization, which "
        f"text prompts include; the servers counted exactly input_len tokens for {exact:,} "
        f"of {checked:,} measured requests that reported a prompt length."
    ]


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
