"""The leader epoch cache: ``[(epoch, start_offset), ...]`` in increasing order.

Implements the lookups of the two epoch generations: KIP-101's single-round
answer (``kip101_end_offset``) and Kafka 2.6's ``endOffsetFor``
(``end_offset_for``), which returns the epoch it answered for.
"""

from __future__ import annotations

UNDEFINED = -1


class EpochCache:
    def __init__(self, entries=()):
        self.entries: list[tuple[int, int]] = [(int(e), int(o)) for e, o in entries]

    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED

    def as_list(self) -> list[list[int]]:
        return [[e, o] for e, o in self.entries]

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True when the cache changed.

        A newer epoch replaces entries that start at or after it (Kafka's
        truncateAndAppend); an older or equal epoch is ignored.
        """
        if self.entries and epoch <= self.entries[-1][0]:
            return False
        self.entries = [(e, o) for e, o in self.entries if o < start_offset]
        self.entries.append((epoch, start_offset))
        return True

    def truncate_from_end(self, offset: int) -> bool:
        """Drop entries starting at or after ``offset`` (after a log truncation)."""
        kept = [(e, o) for e, o in self.entries if o < offset]
        changed = len(kept) != len(self.entries)
        self.entries = kept
        return changed

    def kip101_end_offset(self, epoch: int, leo: int) -> int:
        """Kafka 0.11: LEO for the latest epoch, else the start of the first larger
        epoch, else UNDEFINED."""
        if not self.entries:
            return UNDEFINED
        if epoch == self.entries[-1][0]:
            return leo
        for e, o in self.entries:
            if e > epoch:
                return o
        return UNDEFINED

    def end_offset_for(self, epoch: int, leo: int) -> tuple[int, int]:
        """Kafka 2.6: (largest epoch <= asked, start of the next larger epoch or LEO)."""
        if epoch == UNDEFINED or not self.entries:
            return UNDEFINED, UNDEFINED
        if epoch == self.entries[-1][0]:
            return epoch, leo
        higher = next(((e, o) for e, o in self.entries if e > epoch), None)
        if higher is None:
            return UNDEFINED, UNDEFINED
        floor = None
        for e, o in self.entries:
            if e <= epoch:
                floor = (e, o)
        if floor is None:
            return epoch, higher[1]
        return floor[0], higher[1]
