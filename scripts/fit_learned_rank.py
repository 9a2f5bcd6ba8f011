"""Fit the weights of the learned ranking (hexlocal_core/search/learned_rank.py).

Runs every query of the spent sets through the engine with the learned stage looking on
(it records the candidates and keeps the fused order), fits a pairwise logistic model
(relevant against irrelevant candidates of one query, L2 `--l2`, Newton steps) on them,
prints its leave-one-set-out cross-validation next to the fused order, and prints the
weights folded per query shape; `--out hexlocal_core/search/fitted` writes them where the
engine loads them (learned_rank.json) beside a provenance record.

    python scripts/fit_learned_rank.py [--db PATH] [--errors-db PATH] [--l2 0.001]
        [--weight W] [--sets dev,examples,...] [--judge heldout_fourth,...] [--folds package]
        [--error-map] [--out hexlocal_core/search/fitted]

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
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
from attrs import evolve, frozen

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_retrieval import SETS, _request  # noqa: E402

from benchmarks.common import answerable, same_model_or_exit, write_provenance  # noqa: E402
from hexlocal_core.adapters.local_embedder import build_local_embedder  # noqa: E402
from hexlocal_core.config import Settings  # noqa: E402
from hexlocal_core.evaluation import ingest_targets, load_queries  # noqa: E402
from hexlocal_core.evaluation.folds import package_folds  # noqa: E402
from hexlocal_core.evaluation.metrics import mrr_at, recall_at  # noqa: E402
from hexlocal_core.evaluation.paired import paired_difference  # noqa: E402
from hexlocal_core.index.sqlite.store import Store  # noqa: E402
from hexlocal_core.ports import Reranker  # noqa: E402
from hexlocal_core.search import learned_rank  # noqa: E402
from hexlocal_core.search.engine import SearchEngine  # noqa: E402
from hexlocal_core.search.exact import exact_chunk_ids, parse_identifier  # noqa: E402
from hexlocal_core.search.fusion import rerank_fuse  # noqa: E402
from hexlocal_core.search.learned_stage import ArmsSaw  # noqa: E402
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
# What other docs say about a candidate (anchor text; zero unless `--anchors`).
ANCHOR = ("has_anc", "anc_ov", "anc_cos")
# The reranker's scores of the first fused candidates (zero unless `--judges`).
JUDGE = ("judged", "judge_rel", "judge_rank")
BASE += (*ANCHOR, *JUDGE)
# Features whose weight may differ by query shape (the others share one weight).
BY_SHAPE: tuple[str, ...] = ("rrf", "fts", "vec", "cos", "bm25", "title_ov", "body_ov", "moddoc")
BY_SHAPE += ("dt_extras", "dt_function", "dt_module", "dt_exception", *ANCHOR, *JUDGE)
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

    def _learned(self, arms: ArmsSaw, fused: list[int], rows: Rows) -> list[int]:
        pool = self._candidates(arms, fused, rows)
        self.seen.append((arms.shape, arms.fts_text, pool))
        return fused


def row_of(shape: Shape, features: dict[str, float]) -> list[float]:
    crossed = {f"{shape.value}*{n}": features.get(n, 0.0) for n in BY_SHAPE}
    return [features.get(n, crossed.get(n, 0.0)) for n in NAMES]


def fold_judges(
    folders: Sequence[Path], threads: int = 2, max_length: int = 128
) -> dict[str, Reranker]:
    """Each package's judge: the one trained without it (`benchmarks/bench_judge.py`)."""
    from bench_judge import held_out, load_judge

    out: dict[str, Reranker] = {}
    for folder in folders:
        judge = load_judge(folder, fp32=False, threads=threads, max_length=max_length)
        out.update({package: judge for package in held_out(folder)})
    return out


async def collect(
    db: Path,
    set_names: Sequence[str],
    *,
    error_map: bool = False,
    anchors: bool = False,
    judges: Sequence[Path] = (),
    judge_setup: tuple[int, int, int] = (10, 128, 360),
) -> list[Seen]:
    store = Store(db)
    embedder = build_local_embedder(Settings.from_env())
    await asyncio.to_thread(embedder.ensure_loaded)
    same_model_or_exit(store, embedder.model_id, db)
    depth, length, chars = judge_setup
    tuning = evolve(
        SearchTuning(),
        learned_rank=True,
        error_adapter=error_map,
        rerank_stage="learned",
        judge_depth=depth,
        rerank_chars=chars,
    )
    by_package = fold_judges(judges, max_length=length)
    mode = "rerank" if judges else "rrf"
    arm = None
    if anchors:
        from benchmarks.anchor_index import build as build_anchors

        queries = [q for name in set_names for q in load_queries(SETS[name])]
        items = {p: _request(p, v).items for p, v in ingest_targets(queries) if v is not None}
        arm = await build_anchors(items, db, embedder, db.with_suffix(".anchors.npz"))
    engine = _Recording(store, embedder, None, tuning=tuning, anchors=arm)
    reads = store.session().chunks
    out: list[Seen] = []
    for name, q, relevant in answerable(store, SETS, set_names):
        if judges and q.package not in by_package:
            continue  # no judge was trained without this package
        engine.reranker = by_package.get(q.package)
        engine.seen = []
        await engine.search(q.package, q.query, limit=10, mode=mode, exact=False)
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


def cv_orders(
    seen: Sequence[Seen], l2: float, weight: float, keep: npt.NDArray[np.bool_]
) -> list[list[int]]:
    """Each query's order under package-held-out weights fitted on the `keep` columns."""
    folds = package_folds((s.package for s in seen), PACKAGE_FOLDS)
    masked = [evolve(s, x=s.x * keep) for s in seen]
    orders: dict[int, list[int]] = {}
    for held in sorted(set(folds.values())):
        w = fit([s for s in masked if folds[s.package] != held], l2)
        orders.update(
            {i: bounded(s, w, weight) for i, s in enumerate(masked) if folds[s.package] == held}
        )
    return [orders[i] for i in range(len(seen))]


def compare_features(
    seen: Sequence[Seen], l2: float, weight: float, group: tuple[str, ...]
) -> None:
    """The refit without the `group` features against two refits with them (one weight
    for every shape; a weight per shape), package-held-out, paired query by query."""
    cols = np.array([n.split("*")[-1] in group for n in NAMES])
    crossed = np.array(["*" in n for n in NAMES])
    others = np.array([n.split("*")[-1] in (*ANCHOR, *JUDGE) for n in NAMES]) & ~cols
    variants = {
        "without": ~cols & ~others,
        "shared": ~(cols & crossed) & ~others,
        "per shape": ~others,
    }
    ranks = {
        name: [
            first_relevant(s, o)
            for s, o in zip(seen, cv_orders(seen, l2, weight, keep), strict=True)
        ]
        for name, keep in variants.items()
    }
    base = ranks["without"]
    groups = [
        (name, [i for i, s in enumerate(seen) if s.set_name == name])
        for name in dict.fromkeys(s.set_name for s in seen)
    ]
    groups += [
        (f"kind {k}", [i for i, s in enumerate(seen) if s.kind == k])
        for k in ("task", "concept", "error", "symbol")
    ]
    groups.append(("all", list(range(len(seen)))))
    print(
        f"{'package-held-out':22s} {'n':>4s}  without MRR   "
        + "   ".join(f"{v} (paired)" for v in variants if v != "without")
    )
    for name, idx in groups:
        cells = []
        for v in variants:
            if v == "without":
                continue
            d = paired_difference([base[i] for i in idx], [ranks[v][i] for i in idx])
            mrr = mrr_at([ranks[v][i] for i in idx])
            cells.append(f"{mrr:.3f} {d.delta:+.4f} [{d.low:+.4f}, {d.high:+.4f}]")
        print(
            f"{name:22s} {len(idx):4d}  {mrr_at([base[i] for i in idx]):.3f}        "
            + "   ".join(cells)
        )


def judge_features(
    seen: Sequence[Seen],
    judged: Sequence[Seen],
    l2: float,
    weight: float,
    group: tuple[str, ...],
    per_shape: bool = False,
) -> None:
    """Unspent sets read once: the refit without the `group` features against the refit
    with them, both fitted on every spent set, paired."""
    cols = np.array([n.split("*")[-1] in group for n in NAMES])
    crossed = np.array(["*" in n for n in NAMES])
    others = np.array([n.split("*")[-1] in (*ANCHOR, *JUDGE) for n in NAMES]) & ~cols
    keep = ~others if per_shape else ~(cols & crossed) & ~others
    fits = {
        "without": fit([evolve(s, x=s.x * (~cols & ~others)) for s in seen], l2),
        "with": fit([evolve(s, x=s.x * keep) for s in seen], l2),
    }
    print(f"{'judged':24s} {'n':>4s}  without r@5 / MRR   with r@5 / MRR   with - without, 95%")
    for name in dict.fromkeys(s.set_name for s in judged):
        test = [s for s in judged if s.set_name == name]
        for kind in (*sorted({s.kind for s in test}), "all"):
            part = [s for s in test if kind in ("all", s.kind)]
            a = [first_relevant(s, bounded(s, fits["without"], weight)) for s in part]
            b = [first_relevant(s, bounded(s, fits["with"], weight)) for s in part]
            d = paired_difference(a, b)
            print(
                f"{name + ' ' + kind:24s} {len(part):4d}  {recall_at(a):.3f} / {mrr_at(a):.3f}"
                f"      {recall_at(b):.3f} / {mrr_at(b):.3f}    {d.delta:+.4f}"
                f" [{d.low:+.4f}, {d.high:+.4f}]"
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


def folded_weights(w: npt.NDArray[np.float64]) -> dict[Shape, dict[str, float]]:
    """Each shape's weights: the shared weight plus the shape's own, the features that
    never fired (weight 0) left out."""
    by_name = dict(zip(NAMES, w, strict=True))
    out: dict[Shape, dict[str, float]] = {}
    for shape in SHAPES:
        folded = {
            n: round(float(by_name[n] + by_name.get(f"{shape.value}*{n}", 0.0)), 3) for n in BASE
        }
        out[shape] = {n: v for n, v in folded.items() if v != 0.0}
    return out


def print_weights(folded: dict[Shape, dict[str, float]]) -> None:
    for shape, weights in folded.items():
        print(f"{shape.name}: {weights}")
        current = learned_rank.WEIGHTS[shape]
        drift = max(abs(weights.get(n, 0.0) - current.get(n, 0.0)) for n in BASE)
        print(f"  largest difference from the shipped weights: {drift:.3f}")


def write_weights(
    folder: Path, folded: dict[Shape, dict[str, float]], args: argparse.Namespace, queries: int
) -> None:
    """learned_rank.json (what search/learned_rank.py loads) and its provenance record."""
    path = folder / learned_rank.WEIGHTS_FILE.name
    data = {"format": 1, "shapes": {s.value: w for s, w in folded.items()}}
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    record = write_provenance(
        path,
        script="scripts/fit_learned_rank.py",
        argv=sys.argv[1:],
        sets=(*args.sets, *ERROR_SETS),
        queries=queries,
        model=build_local_embedder(Settings.from_env()).model_id,
        fit=f"pairwise logistic loss, L2 {args.l2}, depth {SearchTuning().learned_depth}",
    )
    print(f"wrote {path} and {record}")


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
        "--anchors",
        action="store_true",
        help="candidates carry anchor features; print the refit with them against without",
    )
    parser.add_argument(
        "--judges",
        type=lambda v: tuple(Path(p) for p in v.split(",") if p),
        default=(),
        help="trained judges (scripts/train_judge.py outputs, package folds): their scores of"
        " the first fused candidates are features; prints the refit with them against without",
    )
    parser.add_argument("--per-shape", action="store_true", help="--judge reads the per-shape fit")
    parser.add_argument("--judge-depth", type=int, default=10, help="candidates the judge scores")
    parser.add_argument("--judge-length", type=int, default=128, help="word pieces it reads")
    parser.add_argument("--judge-chars", type=int, default=360, help="chunk characters it reads")
    parser.add_argument(
        "--error-map",
        action="store_true",
        help="collect the fitted sets with the error-paste map on (leaks: it was fitted on them)",
    )
    parser.add_argument(
        "--out", type=Path, help="write learned_rank.json and its provenance into this folder"
    )
    args = parser.parse_args(argv)
    if set(args.judge) & {*args.sets, *ERROR_SETS}:
        parser.error("a judged set must not be fitted on")
    kw = {
        "error_map": args.error_map,
        "anchors": args.anchors,
        "judges": args.judges,
        "judge_setup": (args.judge_depth, args.judge_length, args.judge_chars),
    }
    seen = asyncio.run(collect(args.db, args.sets, **kw))
    seen += asyncio.run(collect(args.errors_db, ERROR_SETS, **kw))
    if args.anchors or args.judges:
        group = ANCHOR if args.anchors else JUDGE
        compare_features(seen, args.l2, args.weight, group)
        if args.judge:
            judged = asyncio.run(collect(args.db, args.judge, **(kw | {"error_map": True})))
            judge_features(seen, judged, args.l2, args.weight, group, args.per_shape)
        return 0
    cross_validate(seen, args.l2, args.weight, args.folds)
    weights = fit(seen, args.l2)
    print_weights(folded_weights(weights))
    if args.out is not None:
        write_weights(args.out, folded_weights(weights), args, len(seen))
    if args.judge:
        judge(asyncio.run(collect(args.db, args.judge, error_map=True)), weights, args.weight)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
