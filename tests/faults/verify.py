"""What the fault tests conclude from a store after the fault: every acknowledged write
is there (else *lost*), every batch is whole or absent (else *partial*), and the
chains did not fork and the store passes ``check`` (else *forked* / a failed check)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.faults.figures import FIGURES
from tests.faults.writer import NAMESPACE

import erstwhile
from erstwhile import backups

_ID = re.compile(r"^w(\d+-\d+)-\d+$")


@dataclass
class Outcome:
    acknowledged: int = 0
    lost: list[str] = field(default_factory=list)
    partial: list[str] = field(default_factory=list)
    forked: list[str] = field(default_factory=list)
    check_problems: list[str] = field(default_factory=list)

    def record(self) -> None:
        FIGURES.add("acknowledged writes", self.acknowledged)
        FIGURES.add("lost", len(self.lost))
        FIGURES.add("partial", len(self.partial))
        FIGURES.add("forked", len(self.forked))

    def assert_clean(self, context: str = "") -> None:
        assert not self.lost, f"{context}acknowledged but missing: {self.lost[:10]}"
        assert not self.partial, f"{context}partial batches: {self.partial[:10]}"
        assert not self.forked, f"{context}forked chains: {self.forked[:10]}"
        assert not self.check_problems, f"{context}{self.check_problems[:10]}"


def acknowledged(acks: Path) -> tuple[list[str], list[str]]:
    """(batches, chain ids) the writers were told were stored."""
    lines = acks.read_text(encoding="utf-8").splitlines() if acks.exists() else []
    batches = [line.split()[1] for line in lines if line.startswith("batch ")]
    chains = [line.split()[1] for line in lines if line.startswith("chain ")]
    return batches, chains


def verify(target: str, acks: list[Path], size: int, *, acked_only: bool = False) -> Outcome:
    """Opens ``target`` and compares it with what the writers acknowledged.
    ``acked_only``: the store may hold *fewer* writes than acknowledged (a backup
    taken mid-run), so only whole-batch and chain rules apply."""
    outcome = Outcome()
    with erstwhile.open(target, embedder="hash", background_jobs=False) as m:
        store = m.service.store
        with store.reader() as read:
            rows = read("SELECT id, key, superseded_by FROM records WHERE namespace = ?",
                        [NAMESPACE])  # fmt: skip
        report = backups.check(m)
    ids = {row[0] for row in rows}
    per_batch = Counter(match.group(1) for i in ids if (match := _ID.match(i)))
    outcome.partial = [b for b, count in per_batch.items() if count != size]
    holders = [row[0] for row in rows if row[1] == "shared" and row[2] is None]
    if len(holders) > 1:
        outcome.forked.append(f"key shared held by {holders}")
    for finding in report.findings:
        if finding.name in ("chains linear", "keys held once"):
            outcome.forked += finding.problems
        elif not finding.ok:
            outcome.check_problems += [f"{finding.name}: {p}" for p in finding.problems]
    for path in acks:
        batches, chains = acknowledged(path)
        outcome.acknowledged += len(batches) * size + len(chains)
        if acked_only:
            continue
        outcome.lost += [
            f"w{b}-{j}" for b in batches for j in range(size) if f"w{b}-{j}" not in ids
        ]
        outcome.lost += [c for c in chains if c not in ids]
    return outcome
