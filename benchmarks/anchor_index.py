"""An in-memory anchor arm for the retrieval benchmark (the experiment's stand-in for a
stored one): anchors mined from the indexed packages' tarballs (`ingest/anchors.py`),
one BM25 document per target item (its anchor sentences) in an FTS5 table per package,
and one vector per anchor sentence, embedded once and cached by text."""

from __future__ import annotations

import hashlib
import sqlite3
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

import apsw
import numpy as np
import numpy.typing as npt

from hexlocal_core.index.tokens import FTS_TOKENIZER
from hexlocal_core.ingest.anchors import Anchor, mine
from hexlocal_core.model import DocItem
from hexlocal_core.ports import Embedder, Vectors
from hexlocal_core.search.anchor_arm import AnchorEvidence, AnchorRanking, item_of

Matrix = npt.NDArray[np.float32]


class MemoryAnchors:
    def __init__(
        self,
        anchors: Sequence[Anchor],
        first_chunk: Mapping[tuple[str, str], int],
        vectors: Mapping[str, Matrix],
    ) -> None:
        by_target: dict[tuple[str, str], list[str]] = defaultdict(list)
        for a in anchors:
            if (a.package, a.ref) in first_chunk and a.text not in by_target[(a.package, a.ref)]:
                by_target[(a.package, a.ref)].append(a.text)
        self._texts = dict(by_target)
        self._vectors = vectors
        self._db = apsw.Connection(":memory:")
        self._db.execute(
            f"CREATE VIRTUAL TABLE a USING fts5(package UNINDEXED, chunk UNINDEXED, text,"
            f' tokenize="{FTS_TOKENIZER}")'
        )
        self._rows: dict[str, tuple[list[int], Matrix]] = {}
        per_package: dict[str, list[tuple[int, Vectors]]] = defaultdict(list)
        with self._db:
            for (package, ref), texts in by_target.items():
                chunk = first_chunk[(package, ref)]
                self._db.execute(
                    "INSERT INTO a(package, chunk, text) VALUES (?, ?, ?)",
                    (package, chunk, "\n".join(texts)),
                )
                for text in texts:
                    per_package[package].append((chunk, vectors[text]))
        for package, rows in per_package.items():
            ids = [c for c, _ in rows]
            self._rows[package] = (
                ids,
                np.stack([np.asarray(v, dtype=np.float32) for _, v in rows]),
            )
        self.targets = len(by_target)

    def rank(
        self, package: str, phrases: tuple[str, ...], vector: Vectors | None, depth: int
    ) -> AnchorRanking:
        keyword: list[int] = []
        if phrases:
            sql = "SELECT chunk FROM a WHERE a MATCH ? AND package = ? ORDER BY bm25(a) LIMIT ?"
            keyword = [
                int(r[0]) for r in self._db.execute(sql, (" OR ".join(phrases), package, depth))
            ]
        near: list[int] = []
        if vector is not None and package in self._rows:
            ids, matrix = self._rows[package]
            sims = matrix @ np.asarray(vector, dtype=np.float32).reshape(-1)
            best: dict[int, float] = {}
            for cid, sim in zip(ids, sims.tolist(), strict=True):
                if sim > best.get(cid, -2.0):
                    best[cid] = sim
            near = sorted(best, key=lambda c: -best[c])[:depth]
        return AnchorRanking(tuple(keyword), tuple(near))

    def describe(
        self, package: str, refs: tuple[str, ...], vector: Vectors | None
    ) -> dict[str, AnchorEvidence]:
        query = None if vector is None else np.asarray(vector, dtype=np.float32).reshape(-1)
        out: dict[str, AnchorEvidence] = {}
        for ref in refs:
            texts = list(
                dict.fromkeys(
                    [
                        *self._texts.get((package, ref), []),
                        *self._texts.get((package, item_of(ref)), []),
                    ]
                )
            )
            if not texts:
                continue
            cosine = None
            if query is not None:
                cosine = max(float(self._vectors[t] @ query) for t in texts)
            out[ref] = AnchorEvidence("\n".join(texts), cosine)
        return out


def first_chunks(db: Path) -> dict[tuple[str, str], int]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT package, ref, min(id) FROM chunks GROUP BY package, ref")
        return {(p, r): int(i) for p, r, i in rows}
    finally:
        conn.close()


async def embed_texts(embedder: Embedder, texts: Sequence[str], cache: Path) -> dict[str, Matrix]:
    """Each text's vector, from `cache` (an .npz keyed by the text's sha256) when there."""
    stored: dict[str, Matrix] = {}
    if cache.is_file():
        with np.load(cache) as npz:
            stored = {k: npz[k] for k in npz.files}
    key = {t: hashlib.sha256(f"{embedder.model_id}\n{t}".encode()).hexdigest() for t in texts}
    missing = sorted({t for t in texts if key[t] not in stored})
    for start in range(0, len(missing), 64):
        batch = missing[start : start + 64]
        for text, vec in zip(batch, await embedder.embed(batch), strict=True):
            stored[key[text]] = np.asarray(vec, dtype=np.float32)
    if missing:
        np.savez(cache, **stored)
    return {t: stored[key[t]] for t in texts}


async def build(
    items: Mapping[str, Sequence[DocItem]], db: Path, embedder: Embedder, cache: Path
) -> MemoryAnchors:
    anchors = mine(items)
    vectors = await embed_texts(embedder, sorted({a.text for a in anchors}), cache)
    return MemoryAnchors(anchors, first_chunks(db), vectors)
