"""hexlocal's exceptions: one small tree, each message naming the fix.

    HexlocalError                  anything hexlocal raises on purpose
    ├── ConfigError                a setting cannot be used at all
    ├── UserInputError             the caller's arguments are wrong (bad version, empty query)
    ├── NotFound                   the thing asked for does not exist
    │   ├── PackageNotFound        hex.pm has no such package
    │   └── VersionNotFound        the package exists, that version (or its docs) does not
    ├── RemoteError                a remote service failed (timeout, 5xx, rate limit, bad body)
    │   └── RateLimited            429 / 403 with the limit exhausted; carries the reset time
    ├── IngestError                a docs source could not be turned into items
    │   └── UnsafeArchive          a tarball tried traversal, links or a decompression bomb
    ├── ModelError                 a model is absent, broken or gave output we do not recognise
    │   └── ModelMismatch          the index was built by another embedding model
    └── StoreError                 the database cannot be used
        └── SchemaTooNew           the database was written by a newer hexlocal

Faces translate these at their edge: the MCP server into `ToolError`, the CLI into exit
code 1 (2 for `UserInputError`). Degradations are not errors: they are `Notice` values.
"""

from __future__ import annotations


class HexlocalError(Exception):
    """Base of every deliberate hexlocal error; `str(e)` is the user-facing message."""


class ConfigError(HexlocalError):
    """A setting is unusable even after falling back to its default."""


class UserInputError(HexlocalError):
    """The arguments of a call are wrong; the message says which and how to fix them."""


class NotFound(HexlocalError):
    """The requested thing does not exist."""


class PackageNotFound(NotFound):
    """hex.pm does not know the package."""


class VersionNotFound(NotFound):
    """The package exists but that version, or its docs, does not."""


class RemoteError(HexlocalError):
    """A remote service failed after retries."""


class RateLimited(RemoteError):
    """The remote service rate-limited us; `reset_at` says when to retry (ISO time or None)."""

    def __init__(self, message: str, reset_at: str | None = None) -> None:
        super().__init__(message)
        self.reset_at = reset_at


class IngestError(HexlocalError):
    """A docs source could not be parsed into items."""


class UnsafeArchive(IngestError):
    """A tarball was refused: traversal, links, absolute paths or a size bomb."""


class ModelError(HexlocalError):
    """A model is unavailable or produced output hexlocal does not recognise."""


class ModelUnavailable(ModelError):
    """The model is not on this machine (yet). `pending`: a download is under way.

    Not a failure: the search degrades (keyword arm, or fused order) with a notice.
    """

    def __init__(self, message: str, *, pending: bool = False) -> None:
        super().__init__(message)
        self.pending = pending


class ModelMismatch(ModelError):
    """The index was built by another embedding model than the configured one."""


class StoreError(HexlocalError):
    """The database cannot be opened or used."""


class SchemaTooNew(StoreError):
    """The database schema is newer than this version of hexlocal understands."""
