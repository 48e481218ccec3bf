"""The developers' cache outside the checkout, for what the tests recompute at length
(mypy's incremental cache, the data builder's pool embeddings).

``$RAG_POSITION_DEV_CACHE``, else ``$XDG_CACHE_HOME/rag-position-dev`` (``~/.cache``):
a fresh clone, as CI runs, then finds what an earlier run computed instead of paying
it again. Only what is keyed by everything it depends on is kept here (mypy's source
hashes; the builder's key of data, embedder and text format), so a cache never hides a
change; delete the folder to start cold.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def dev_cache(kind: str) -> Path:
    """The folder for ``kind`` (made on first use)."""
    root = os.environ.get("RAG_POSITION_DEV_CACHE")
    if root:
        folder = Path(root) / kind
    else:
        home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        folder = home / "rag-position-dev" / kind
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def keep(source: Path, kept: Path) -> None:
    """Copy ``source`` to ``kept`` whole or not at all (another run may read it now)."""
    fd, temporary = tempfile.mkstemp(dir=kept.parent, prefix=f".{kept.name}.")
    os.close(fd)
    try:
        shutil.copyfile(source, temporary)
        os.replace(temporary, kept)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
