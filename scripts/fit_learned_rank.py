"""Fit the weights of the learned ranking (hexlocal_core/search/learned_rank.py).

Runs every query of the spent sets through the engine with the learned stage looking on
(it records the candidates and keeps the fused order), fits a pairwise logistic model
(relevant against irrelevant candidates of one query, L2 `--l2`, Newton steps) on them,
prints its leave-one-set-out cross-validation next to the fused order, and prints the
weights folded per query shape, ready to paste into `WEIGHTS`.

    python scripts/fit_learned_rank.py [--db PATH] [--errors-db PATH] [--l2 0.001]
        [--weight W] [--sets dev,examples,...] [--judge heldout_fourth,...] [--folds package]
        [--error-map]

The fitted sets are searched with the error-paste map off unless `--error-map`: the shipped
map was fitted on their error queries, so with it on their cosine features are better than
any user's, and the fit learns to trust the vector arm on errors (lever 24 in
docs/lab/learned-ranking.md: error MRR@10 .80 with it, .65 without). Judged sets search as users do.

`--folds package` holds out whole packages instead of whole sets (the sets share packages
and answers; see hexlocal_core/evaluation/folds.py). `--judge` names unspent sets of the
main database: they are never fitted on; each is scored once, by kind, in the fused order,
with the shipped weights and with the new fit.

The databases are those of `benchmarks/bench_retrieval.py` (build them with it first;
the error sets pin other versions of two packages, so they live in their own). Never fit
on a set kept for confirmation (heldout_tasks): that set judges the fit once.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
from attrs import evolve, frozen

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_retrieval import SETS  # noqa: E402

from benchmarks.common import answerable, same_model_or_exit  # noqa: E402
from hexlocal_core.adapters.local_embedder import build_local_embedder  # noqa: E402
from hexlocal_core.config import Settings  # noqa: E402
from hexlocal_core.evaluation.folds import package_folds  # noqa: E402
from hexlocal_core.evaluation.metrics import mrr_at, recall_at  # noqa: E402
from hexlocal_core.evaluation.paired import paired_difference  # noqa: E402
from hexlocal_core.index.sqlite.store import Store  # noqa: E402
from hexlocal_core.search import learned_rank  # noqa: E402
from hexlocal_core.search.engine import SearchEngine, _ArmsSaw  # noqa: E402
from hexlocal_core.search.exact import exact_chunk_ids, parse_identifier  # noqa: E402
from hexlocal_core.search.fusion import rerank_fuse  # noqa: E402
from hexlocal_core.search.query_shape import Shape  # noqa: E402
from hexlocal_core.search.rows import Rows  # noqa: E402
from hexlocal_core.search.tuning import SearchTuning  # noqa: E402

MAIN_SETS = ("dev", "examples", "agent", "confirm")
ERROR_SETS = ("errors", "heldout_errors")
PACKAGE_FOLDS = 7
DOC_TYPES: tuple[str, ...] = (
    "module",
    "behaviour",
    "protocol",
    "exception",
    "task",
    "function",
    "macro",
)
DOC_TYPES += ("callback", "type", "extras")
BASE: tuple[str, ...] = (
    "rrf",
    "fts",
    "vec",
    "cos",
    "bm25",
    "title_ov",
    "body_ov",
    "title_any",
    "moddoc",
)
BASE += ("clen", "example", *(f"dt_{t}" for t in DOC_TYPES))
# Features whose weight may differ by query shape (the others share one weight).
BY_SHAPE: tuple[str, ...] = ("rrf", "fts", "vec", "cos", "bm25", "title_ov", "body_ov", "moddoc")
BY_SHAPE += ("dt_extras", "dt_function", "dt_module", "dt_exception")
SHAPES = (Shape.PROSE, Shape.ERROR, Shape.IDENTIFIER)
NAMES = (*BASE, *(f"{s.value}*{n}" for s in SHAPES for n in BY_SHAPE))


@frozen
class Seen:
    """One query's candidates, fused order, as the learned stage would have read them."""

    set_name: str
    kind: str
    package: str
    shape: Shape
    x: npt.NDArray[np.float64]  # candidates x NAMES
    relevant: npt.NDArray[np.bool_]
    ids: tuple[int, ...]
    exact: tuple[int, ...]
    relevant_ids: frozenset[int]
    shipped: tuple[float, ...]  # the shipped weights' score of each candidate


class _Recording(SearchEngine):
    """Records what the learned stage reads and keeps the fused order."""

    seen: list[tuple[Shape, str, list[learned_rank.Candidate]]]

    def _learned(self, arms: _ArmsSaw, fused: list[int], rows: Rows) -> list[int]:
        pool = self._candidates(arms, fused, rows)
        self.seen.append((arms.plan.shape, arms.plan.fts_text, pool))
        return fused


def row_of(shape: Shape, features: dict[str, float]) -> list[float]:
    crossed = {f"{shape.value}*{n}": features.get(n, 0.0) for n in BY_SHAPE}
    return [features.get(n, crossed.get(n, 0.0)) for n in NAMES]


async def collect(db: Path, set_names: Sequence[str], *, error_map: bool = False) -> list[Seen]:
    store = Store(db)
    embedder = build_local_embedder(Settings.from_env())
    await asyncio.to_thread(embedder.ensure_loaded)
    same_model_or_exit(store, embedder.model_id, db)
    tuning = evolve(SearchTuning(), learned_rank=True, error_adapter=error_map)
    engine = _Recording(store, embedder, None, tuning=tuning)
    reads = store.session().chunks
    out: list[Seen] = []
    for name, q, relevant in answerable(store, SETS, set_names):
        engine.seen = []
        await engine.search(q.package, q.query, limit=10, mode="rrf", exact=False)
        if not engine.seen:
            continue
        shape, text, pool = engine.seen[0]
        feats = learned_rank.features(learned_rank.words(text), pool)
        ident = parse_identifier(q.query)
        exact = exact_chunk_ids(reads, q.package, ident) if ident else []
        out.append(
            Seen(
                name,
                q.kind,
                q.package,
                shape,
                np.array([row_of(shape, f) for f in feats], dtype=np.float64),
                np.array([c.row.id in relevant for c in pool], dtype=bool),
                tuple(c.row.id for c in pool),
                tuple(exact),
                relevant,
                tuple(learned_rank.score(shape, learned_rank.words(text), pool)),
            )
        )
    store.close()
    return out


def fit(seen: Sequence[Seen], l2: float, steps: int = 50) -> npt.NDArray[np.float64]:
    """Pairwise logistic regression, each query weighing the same, by Newton's method."""
    diffs, weights = [], []
    for s in seen:
        pos, neg = s.x[s.relevant], s.x[~s.relevant]
        if len(pos) and len(neg):
            d = (pos[:, None, :] - neg[None, :, :]).reshape(-1, len(NAMES))
            diffs.append(d)
            weights.append(np.full(len(d), 1.0 / len(d)))
    d = np.concatenate(diffs)
    wt = np.concatenate(weights) / len(diffs)
    w = np.zeros(len(NAMES))
    for _ in range(steps):
        p = 1 / (1 + np.exp(-np.clip(d @ w, -30, 30)))
        grad = -(d * (wt * (1 - p))[:, None]).sum(0) + l2 * w
        hess = (d * (wt * p * (1 - p))[:, None]).T @ d + l2 * np.eye(len(NAMES))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    return w


def first_relevant(s: Seen, order: Sequence[int]) -> int | None:
    ranked = list(dict.fromkeys([*s.exact, *(s.ids[i] for i in order)]))[:10]
    return next((n for n, cid in enumerate(ranked, 1) if cid in s.relevant_ids), None)


def bounded(s: Seen, w: npt.NDArray[np.float64], weight: float) -> list[int]:
    """Indices in the order `learned_rank.learned_order` gives (fused back by RRF)."""
    return _fused_back(s, list(s.x @ w), weight)


def cross_validate(seen: Sequence[Seen], l2: float, weight: float, by: str = "set") -> None:
    """Each query ordered by weights fitted without its set (`by="set"`) or without its
    package's fold (`by="package"`, 7 folds: what a package nobody fitted on gets)."""
    folds = package_folds((s.package for s in seen), PACKAGE_FOLDS)
    fold_of = {
        "set": lambda s: s.set_name,
        "package": lambda s: str(folds[s.package]),
    }[by]
    orders: dict[int, list[int]] = {}
    for held in dict.fromkeys(fold_of(s) for s in seen):
        w = fit([s for s in seen if fold_of(s) != held], l2)
        orders.update({i: bounded(s, w, weight) for i, s in enumerate(seen) if fold_of(s) == held})
    print(f"{'held out by ' + by:24s} {'n':>4s}  fused r@5 / MRR   learned r@5 / MRR")
    for name in dict.fromkeys(s.set_name for s in seen):
        test = [i for i, s in enumerate(seen) if s.set_name == name]
        kinds = sorted({seen[i].kind for i in test})
        for kind in (*kinds, "all") if len(kinds) > 1 else ("all",):
            part = [i for i in test if kind in ("all", seen[i].kind)]
            base = [first_relevant(seen[i], range(len(seen[i].ids))) for i in part]
            learned = [first_relevant(seen[i], orders[i]) for i in part]
            print(
                f"{name + ' ' + kind:24s} {len(part):4d}  {recall_at(base):.3f} / "
                f"{mrr_at(base):.3f}     {recall_at(learned):.3f} / {mrr_at(learned):.3f}"
            )


def judge(seen: Sequence[Seen], w: npt.NDArray[np.float64], weight: float) -> None:
    print(
        f"{'judged':24s} {'n':>4s}  fused r@5 / MRR   shipped r@5 / MRR   refit r@5 / MRR"
        "   refit - shipped MRR, 95% paired interval"
    )
    for name in dict.fromkeys(s.set_name for s in seen):
        test = [s for s in seen if s.set_name == name]
        for kind in (*sorted({s.kind for s in test}), "all"):
            part = [s for s in test if kind in ("all", s.kind)]
            fused, shipped, refit = (
                [first_relevant(s, range(len(s.ids))) for s in part],
                [first_relevant(s, _fused_back(s, s.shipped, weight)) for s in part],
                [first_relevant(s, bounded(s, w, weight)) for s in part],
            )
            cells = "   ".join(
                f"{recall_at(o):.3f} / {mrr_at(o):.3f}  " for o in (fused, shipped, refit)
            )
            d = paired_difference(shipped, refit)
            print(
                f"{name + ' ' + kind:24s} {len(part):4d}  {cells}"
                f"   {d.delta:+.3f} [{d.low:+.3f}, {d.high:+.3f}]"
            )


def _fused_back(s: Seen, scores: Sequence[float], weight: float) -> list[int]:
    return list(rerank_fuse(list(range(len(s.ids))), list(scores), weight=weight))


def print_weights(w: npt.NDArray[np.float64]) -> None:
    by_name = dict(zip(NAMES, w, strict=True))
    for shape in SHAPES:
        folded = {
            n: round(float(by_name[n] + by_name.get(f"{shape.value}*{n}", 0.0)), 3) for n in BASE
        }
        print(f"{shape.name}: {folded}")
        current = learned_rank.WEIGHTS[shape]
        drift = max(abs(folded[n] - current.get(n, 0.0)) for n in BASE)
        print(f"  largest difference from the shipped weights: {drift:.3f}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    bench = REPO / ".hexlocal-cache" / "bench"
    parser.add_argument("--db", type=Path, default=bench / "retrieval.db")
    parser.add_argument("--errors-db", type=Path, default=bench / "retrieval-errors.db")
    parser.add_argument("--l2", type=float, default=0.001)
    parser.add_argument(
        "--weight", type=float, default=SearchTuning().learned_weight, help="learned_weight"
    )
    parser.add_argument("--sets", type=lambda v: tuple(v.split(",")), default=MAIN_SETS)
    parser.add_argument("--judge", type=lambda v: tuple(v.split(",")), default=())
    parser.add_argument("--folds", choices=("set", "package"), default="set")
    parser.add_argument(
        "--error-map",
        action="store_true",
        help="collect the fitted sets with the error-paste map on (leaks: it was fitted on them)",
    )
    args = parser.parse_args(argv)
    if set(args.judge) & {*args.sets, *ERROR_SETS}:
        parser.error("a judged set must not be fitted on")
    seen = asyncio.run(collect(args.db, args.sets, error_map=args.error_map))
    seen += asyncio.run(collect(args.errors_db, ERROR_SETS, error_map=args.error_map))
    cross_validate(seen, args.l2, args.weight, args.folds)
    weights = fit(seen, args.l2)
    print_weights(weights)
    if args.judge:
        judge(asyncio.run(collect(args.db, args.judge, error_map=True)), weights, args.weight)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
