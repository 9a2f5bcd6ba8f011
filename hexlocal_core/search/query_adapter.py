"""A linear map on the query vector of error pastes (lever 21, docs/lab/error-map.md).

A pasted error embeds near whatever its noise resembles (stack lines, PIDs, SQL), not near
the item that explains it. The map q' = q + A q, fitted on the spent sets' error queries
(`scripts/fit_query_adapter.py`), moves such a vector toward the explaining chunks. It is
fitted for one embedding model and used only with it; the stored vectors do not change, so
it needs no reindex and an index of any other model searches as before. The map is data,
`fitted/error_adapter.npz`, with `fitted/error_adapter.provenance.json` beside it.
"""

from __future__ import annotations

import logging
import zipfile
from functools import cache
from pathlib import Path

import numpy as np
import numpy.typing as npt
from attrs import frozen

from hexlocal_core.ports import Vectors

log = logging.getLogger(__name__)

ERROR_ADAPTER = Path(__file__).with_name("fitted") / "error_adapter.npz"


@frozen
class QueryAdapter:
    model: str  # the embedding model whose query vectors it maps
    matrix: npt.NDArray[np.float32]  # A, (dims, dims)

    def apply(self, vector: Vectors) -> Vectors:
        """The unit vector of q + A q, one row; `vector` itself when the map does not fit
        it (other dims) or the result is degenerate."""
        q = np.asarray(vector, dtype=np.float32).reshape(1, -1)
        if q.shape[1] != self.matrix.shape[1]:
            return vector
        moved = q + q @ self.matrix.T
        norm = float(np.linalg.norm(moved))
        if not np.isfinite(norm) or norm == 0.0:
            return vector
        unit: npt.NDArray[np.float32] = (moved / norm).astype(np.float32)
        return unit


def load_adapter(path: Path) -> QueryAdapter | None:
    """The adapter stored at `path`; None (logged) when it is absent or unreadable, so search
    goes on with the query vector as embedded."""
    try:
        with np.load(path, allow_pickle=False) as data:
            model, matrix = str(data["model"]), np.asarray(data["matrix"], dtype=np.float32)
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        log.warning("query adapter %s not used: %s", path, exc)
        return None
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or not np.isfinite(matrix).all():
        log.warning("query adapter %s not used: a %s matrix", path, matrix.shape)
        return None
    return QueryAdapter(model, matrix)


@cache
def error_adapter() -> QueryAdapter | None:
    return load_adapter(ERROR_ADAPTER)


def adapted(vector: Vectors, model: str, adapter: QueryAdapter | None) -> Vectors:
    """The vector the arm searches with: mapped when the adapter was fitted for `model`."""
    if adapter is None or adapter.model != model:
        return vector
    return adapter.apply(vector)
