"""The judge on the query sets: rerank mode with trained cross-encoders, package-held-out.

Each judge is a `scripts/train_judge.py` output folder; its `provenance.json` names the
packages it never read (`held_out_packages`), and it scores only those packages' queries,
so every query is judged by a model that did not see its package. `--seen` scores every
query with the one judge given (the shipped judge, reported as information).

    python benchmarks/bench_judge.py --db INDEX --sets heldout_seventh --judge J0 --judge J1
        [--pool 10] [--max-length 128] [--chars 360] [--authority bounded] [--fp32]
        [--json OUT] [--seen]

Prints recall@5 / MRR@10 by set and kind, and the warm in-process latency of the searches
(p50, p95). `--json` writes each query's outcome as `bench_retrieval.py --json` does, under
the mode `rerank`, for `scripts/compare_runs.py --mode-b rerank`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attrs import evolve

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.bench_retrieval import SETS, _names  # noqa: E402
from benchmarks.common import same_model_or_exit  # noqa: E402
from hexlocal_core.adapters import model_sources  # noqa: E402
from hexlocal_core.adapters.cross_encoder import LocalCrossEncoder, RerankerOptions  # noqa: E402
from hexlocal_core.adapters.late_interaction import (  # noqa: E402
    JudgeFiles,
    JudgeOptions,
    LateInteractionJudge,
)
from hexlocal_core.adapters.local_embedder import build_local_embedder  # noqa: E402
from hexlocal_core.config import Settings  # noqa: E402
from hexlocal_core.evaluation import EvalOptions, load_queries, run_eval  # noqa: E402
from hexlocal_core.evaluation.metrics import mrr_at, percentile, recall_at  # noqa: E402
from hexlocal_core.index.sqlite.store import Store  # noqa: E402
from hexlocal_core.ports import Reranker  # noqa: E402
from hexlocal_core.search.engine import SearchEngine  # noqa: E402
from hexlocal_core.search.tuning import SearchTuning  # noqa: E402


def judge_files(folder: Path, fp32: bool) -> model_sources.ModelFiles:
    graph = folder / ("model.onnx" if fp32 else "model.int8.onnx")
    return model_sources.ModelFiles(
        model_sources.Which.RERANKER,
        f"hexlocal-judge:{folder.name}",
        graph,
        folder / "tokenizer.json",
        "trained",
        str(folder),
    )


def load_judge(folder: Path, *, fp32: bool, max_length: int = 128, threads: int = 2) -> Reranker:
    """The judge a training run wrote: a cross-encoder, or a late-interaction encoder."""
    files = judge_files(folder, fp32)
    raw = json.loads((folder / "provenance.json").read_text(encoding="utf-8"))
    if raw.get("kind") == "late":
        return LateInteractionJudge(
            JudgeFiles(files.onnx_path, files.tokenizer_path),
            model_id=f"local:{files.name}",
            options=JudgeOptions(passage_length=max_length, threads=threads),
        )
    options = RerankerOptions(max_length=max_length, threads=threads)
    return LocalCrossEncoder(lambda: files, model_id=f"local:{files.name}", options=options)


def held_out(folder: Path) -> frozenset[str]:
    raw = json.loads((folder / "provenance.json").read_text(encoding="utf-8"))
    return frozenset(raw.get("held_out_packages", []))


async def run(args: argparse.Namespace) -> dict[str, Any]:
    store = Store(args.db)
    embedder = build_local_embedder(Settings.from_env())
    await asyncio.to_thread(embedder.ensure_loaded)
    same_model_or_exit(store, embedder.model_id, args.db)
    tuning = evolve(
        SearchTuning(),
        pool=args.pool,
        rerank_chars=args.chars,
        rerank_authority=args.authority,
    )
    merged: dict[str, list[dict[str, Any]]] = defaultdict(list)
    latency: list[float] = []
    for folder in args.judge:
        reranker = load_judge(folder, fp32=args.fp32, max_length=args.max_length)
        await reranker.warm_up()
        engine = SearchEngine(store, embedder, reranker, tuning=tuning)
        mine = held_out(folder)
        for name in args.sets:
            queries = [q for q in load_queries(SETS[name]) if args.seen or q.package in mine]
            if not queries:
                continue
            report = await run_eval(
                engine,
                store,
                queries,
                options=EvalOptions(modes=("rerank",)),
                source=name,
                models={"embedder": embedder.model_id, "reranker": reranker.model_id},
            )
            data = report.to_dict()
            merged[name].extend(data["queries"])
            latency += [r.ms for res in report.results if (r := res.run("rerank")) is not None]
    store.close()
    _print(merged, latency)
    return {name: {"queries": qs} for name, qs in merged.items()}


def _print(merged: dict[str, list[dict[str, Any]]], latency: Sequence[float]) -> None:
    print("set / kind                  n   recall@5   MRR@10")
    for name, queries in merged.items():
        ok = [q for q in queries if q.get("status") == "ok"]
        for kind in (*sorted({q["kind"] for q in ok}), "all"):
            ranks = [q["runs"]["rerank"]["rank"] for q in ok if kind in ("all", q["kind"])]
            print(
                f"{name + ' ' + kind:24s} {len(ranks):4d}   {recall_at(ranks):.3f}     "
                f"{mrr_at(ranks):.3f}"
            )
    if latency:
        print(
            f"warm in-process latency (rerank): p50 {percentile(latency, 50):.1f} ms,"
            f" p95 {percentile(latency, 95):.1f} ms (n={len(latency)})"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--sets", type=_names, required=True)
    parser.add_argument("--judge", type=Path, action="append", required=True)
    parser.add_argument("--pool", type=int, default=10)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--chars", type=int, default=360)
    parser.add_argument("--authority", choices=("bounded", "full"), default="bounded")
    parser.add_argument("--fp32", action="store_true", help="the fp32 graph, not int8")
    parser.add_argument("--seen", action="store_true", help="every query, whatever the judge read")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.seen and len(args.judge) != 1:
        parser.error("--seen takes one judge")
    result = asyncio.run(run(args))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
