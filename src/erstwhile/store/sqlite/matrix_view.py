"""One search's reading of a vector matrix (:mod:`erstwhile.store.sqlite.vectors`), as
the matrix and its list index (:mod:`erstwhile.store.sqlite.ann`) both read it: a module
of its own, so neither imports the other."""

from __future__ import annotations

import numpy as np

from erstwhile.store.sql.scoring import scores_at


class View:
    """One search's reading of a matrix: its arrays as they were when taken. A writer
    appends past ``count`` or swaps in new arrays (growing, regrouping), so these stay
    consistent with one another; a vector rewritten in place may be read either way,
    as a refresh running beside the search would let it be."""

    __slots__ = ("count", "layout", "live", "position", "rowid_of", "rows")

    def __init__(self, rows: np.ndarray, position: np.ndarray, rowid_of: np.ndarray,
                 count: int, live: int, layout: int) -> None:  # fmt: skip
        self.rows, self.position, self.rowid_of = rows, position, rowid_of
        self.count, self.live, self.layout = count, live, layout

    def locate(self, rowids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The given records that have a vector in this view, and their matrix rows: one
        lookup, which scoring then uses as is (no second rowid -> row gather). A row a
        writer appended after the view was read (past ``count``: the arrays it shares
        with the matrix may already name it) is not in it."""
        if rowids.shape[0] and int(rowids.max()) < self.position.shape[0]:
            positions = self.position[rowids]
        else:
            positions = np.full(rowids.shape[0], -1, np.int64)
            inside = rowids < self.position.shape[0]
            positions[inside] = self.position[rowids[inside]]
        if positions.shape[0] and (int(positions.min()) < 0 or int(positions.max()) >= self.count):
            kept = (positions >= 0) & (positions < self.count)
            return rowids[kept], positions[kept]
        return rowids, positions

    def whole(self, rowids: np.ndarray) -> bool:
        """Whether these (distinct) records with a vector are every row of the matrix:
        a scope scored in matrix order, with no gather (``rowid_of`` names the best)."""
        return rowids.shape[0] == self.count == self.live

    def scores_at(self, positions: np.ndarray, query: np.ndarray) -> np.ndarray:
        """Cosine similarity of ``query`` with the vectors at these matrix rows: a
        narrow scope gathers its rows, a wide one scores every row in one pass."""
        return scores_at(self.rows, self.count, positions, query)
