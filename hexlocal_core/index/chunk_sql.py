"""The chunk reads both engines answer with one statement: hydration, exact lookup, the
titles a misspelt identifier is compared against, evaluation's reads.

`ChunkSql` is the part of `seam.ChunkReads` written once; `sqlite/chunks.py` and
`pg/chunks.py` inherit it and add the two retrieval arms, which each engine answers its
own way. The callers decide *what* to ask (depths, which doc types an identifier means);
these statements decide *how*. Text is ordered bytewise on both engines, and a `SELECT`
of distinct titles groups them, so each title takes its first chunk's place (document
order) and belongs to the preferred module when any of its chunks does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from hexlocal_core.index.rows import ChunkRow, ItemQuery, PackageStats
from hexlocal_core.index.sql import SqlRunner

# Column order of ChunkRow; the SELECT names them so a new column never shifts the tuple.
CHUNK_COLUMNS = (
    "id, package, version, ordinal, ref, page, title, doc_type, module, function, arity,"
    " signature, deprecated, since, content, content_hash, embed_hash, split_terms,"
    " hexdocs_url, source_url, source, has_example"
)


def chunk_row(r: Sequence[Any]) -> ChunkRow:
    return ChunkRow(
        id=int(r[0]),
        package=r[1],
        version=r[2],
        ordinal=r[3],
        ref=r[4],
        page=r[5],
        title=r[6],
        doc_type=r[7],
        module=r[8],
        function=r[9],
        arity=r[10],
        signature=r[11],
        deprecated=r[12],
        since=r[13],
        content=r[14],
        content_hash=r[15],
        embed_hash=r[16],
        split_terms=r[17],
        hexdocs_url=r[18],
        source_url=r[19],
        source=r[20],
        has_example=bool(r[21]),
    )


class ChunkSql(SqlRunner):
    """`seam.ChunkReads` but for the retrieval arms (see the module docstring)."""

    def hydrate(self, ids: Sequence[int]) -> list[ChunkRow]:
        """Rows for the ids, in the order given; ids not stored are left out."""
        if not ids:
            return []
        where, params = self.dialect.one_of("id", ids, "bigint")
        found = self._select(f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE {where}", params)
        by_id = {int(r[0]): chunk_row(r) for r in found}
        return [by_id[i] for i in ids if i in by_id]

    def locate(self, ids: Sequence[int]) -> dict[int, tuple[str, str]]:
        """(ref, page) of each chunk id, in one query."""
        unique = list(dict.fromkeys(ids))
        if not unique:
            return {}
        where, params = self.dialect.one_of("id", unique, "bigint")
        found = self._select(f"SELECT id, ref, page FROM chunks WHERE {where}", params)
        return {int(r[0]): (str(r[1]), str(r[2])) for r in found}

    # -- exact lookup ----------------------------------------------------------------------

    def exact_ids(self, package: str, item: ItemQuery, *, limit: int) -> list[int]:
        """Chunk ids of the item (its own ref first, then its heading sub-items, in order)."""
        where = ["package = ?"]
        params: list[Any] = [package]
        if item.module:
            where.append("module = ?")
            params.append(item.module)
        if item.function is not None:
            where.append("function = ?")
            params.append(item.function)
            if item.arity is not None:
                where.append("arity = ?")
                params.append(item.arity)
        if item.doc_types:
            condition, values = self.dialect.one_of("doc_type", item.doc_types, "text")
            where.append(condition)
            params.extend(values)
        if item.not_doc_types:
            condition, values = self.dialect.none_of("doc_type", item.not_doc_types, "text")
            where.append(condition)
            params.extend(values)
        if item.function is None:
            order = "CASE WHEN ref = ? THEN 0 ELSE 1 END, id"
            params.append(f"{item.module}.html")
        else:
            # `:maps.iterator/2` is the function: a type or callback of the same name and
            # arity (`t:maps:iterator/2`) comes after it unless asked for with `t:`/`c:`.
            order = (
                "CASE WHEN doc_type IN ('function', 'macro') THEN 0"
                " WHEN doc_type IN ('callback', 'macrocallback') THEN 1 ELSE 2 END,"
                f" CASE WHEN {self.dialect.sub_item} THEN 1 ELSE 0 END, id"
            )
        sql = f"SELECT id FROM chunks WHERE {' AND '.join(where)} ORDER BY {order} LIMIT ?"
        params.append(self.dialect.limit(limit))
        return [int(r[0]) for r in self._select(sql, params)]

    def titles_named(
        self, package: str, function: str, prefer_module: str | None, limit: int
    ) -> list[str]:
        """Titles of the items called `function` (any module or arity), `prefer_module`'s
        first."""
        d = self.dialect
        sql = (
            "SELECT title FROM chunks WHERE package = ? AND function = ?"
            f" AND {d.has_anchor} AND NOT {d.sub_item} GROUP BY title"
            f" ORDER BY {d.any_true}(module = ?) DESC NULLS LAST, title{d.bytewise} LIMIT ?"
        )
        params = (package, function, prefer_module, d.limit(limit))
        return [str(r[0]) for r in self._select(sql, params)]

    def titles_in_module(self, package: str, module: str, limit: int) -> list[str]:
        """Titles of a module's items (not their heading sub-items), in document order."""
        sql = (
            "SELECT title FROM chunks WHERE package = ? AND module = ?"
            f" AND NOT {self.dialect.sub_item} GROUP BY title ORDER BY min(id) LIMIT ?"
        )
        params = (package, module, self.dialect.limit(limit))
        return [str(r[0]) for r in self._select(sql, params)]

    def member_titles(self, package: str, limit: int) -> list[str]:
        """Titles of the package's members (functions, macros, callbacks, types), in
        document order: what a misspelt identifier with no known module is compared
        against."""
        sql = (
            "SELECT title FROM chunks WHERE package = ? AND function IS NOT NULL"
            f" AND NOT {self.dialect.sub_item} GROUP BY title ORDER BY min(id) LIMIT ?"
        )
        return [str(r[0]) for r in self._select(sql, (package, self.dialect.limit(limit)))]

    def module_names(self, package: str, limit: int) -> list[str]:
        """The package's module names, sorted: what a misspelt module is compared against."""
        sql = (
            "SELECT module FROM chunks WHERE package = ? AND module IS NOT NULL"
            f" GROUP BY module ORDER BY module{self.dialect.bytewise} LIMIT ?"
        )
        return [str(r[0]) for r in self._select(sql, (package, self.dialect.limit(limit)))]

    def packages_with_module(self, module: str) -> list[str]:
        """The indexed packages documenting `module`, by name: a lookup without a package.
        One probe of the (package, module) index per package, not a scan of every chunk."""
        sql = (
            "SELECT name FROM packages p WHERE EXISTS"
            " (SELECT 1 FROM chunks c WHERE c.package = p.name AND c.module = ?)"
            f" ORDER BY name{self.dialect.bytewise}"
        )
        return [str(r[0]) for r in self._select(sql, (module,))]

    def ids_by_ref(self, package: str, targets: Sequence[tuple[str, str]]) -> frozenset[int]:
        """Ids of the package's chunks whose ref equals a target or starts with its prefix.

        `targets` are (ref, prefix) pairs. Prefixes are compared with `substr`, not LIKE,
        because `_` (a LIKE wildcard) is everywhere in Elixir refs.
        """
        if not targets:
            return frozenset()
        clauses: list[str] = []
        params: list[Any] = [package]
        for ref, prefix in targets:
            clauses.append("(ref = ? OR substr(ref, 1, ?) = ?)")
            params.extend([ref, len(prefix), prefix])
        sql = f"SELECT id FROM chunks WHERE package = ? AND ({' OR '.join(clauses)})"
        return frozenset(int(r[0]) for r in self._select(sql, params))

    # -- evaluation ------------------------------------------------------------------------

    def package_stats(self) -> list[PackageStats]:
        sql = (
            "SELECT p.name, p.version, p.chunker_version, p.embed_model,"
            " count(c.id), count(DISTINCT c.ref)"
            " FROM packages p LEFT JOIN chunks c ON c.package = p.name"
            f" GROUP BY p.name ORDER BY p.name{self.dialect.bytewise}"
        )
        return [
            PackageStats(str(r[0]), str(r[1]), int(r[2]), r[3], int(r[4]), int(r[5]))
            for r in self._select(sql)
        ]

    def content_hashes(self) -> Iterator[str]:
        """Every chunk's content hash, in a stable order (package, ref, ordinal, id)."""
        b = self.dialect.bytewise
        sql = f"SELECT content_hash FROM chunks ORDER BY package{b}, ref{b}, ordinal, id"
        for (content_hash,) in self._select(sql):
            yield str(content_hash)
