"""MkDocs hooks: links to repository files outside ``docs/``; index expressions in docstrings.

The pages link to a run's report, a plot or a package README with a path relative to
the page (``../results/quick/report.md``), as GitHub reads them. MkDocs knows only the
files under ``docs/``, so this hook adds each such target to the site as a plain file,
copied under ``repo/`` as it is (a Markdown report stays Markdown), and the link points
at the copy. A target that does not exist is left alone: MkDocs reports the link as
broken, which ``--strict`` makes an error.

A docstring that writes an index expression as prose (``metadata["rag_position"]["gold"]``,
``[0, 2, 4, 3, 1]``) reads to Markdown as a reference link, ``[text][label]``, and the
cross-reference plugin warns that the label names no object. Such a label is not a
Python name, so that warning is dropped; one for a dotted name (a real cross-reference
whose target is missing) is kept, and ``--strict`` fails on it.
"""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files, InclusionLevel

_LINK = re.compile(r"\]\(<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\)")  # [text](url) and ![alt](url)
_FENCE = re.compile(r"^(`{3,}|~{3,}).*?^\1", re.S | re.M)  # code blocks hold no links


_UNRESOLVED = re.compile(r"Could not find cross-reference target '(.*)'$", re.S)
_NAME = re.compile(r"[A-Za-z_][\w.]*")


def _is_a_name_or_other(record: logging.LogRecord) -> bool:
    """False for the warning about a label that is no Python name (so not a reference)."""
    found = _UNRESOLVED.search(record.getMessage())
    return found is None or _NAME.fullmatch(found.group(1)) is not None


class _RepoFile(File):
    """A repository file copied into the site as it is, even a Markdown one."""

    def is_documentation_page(self) -> bool:
        return False

    def is_static_page(self) -> bool:
        return False


def on_config(config: Any) -> Any:
    logger = logging.getLogger("mkdocs.plugins.mkdocs_autorefs._internal.plugin")
    if _is_a_name_or_other not in logger.filters:
        logger.addFilter(_is_a_name_or_other)
    return config


def on_files(files: Files, config: Any) -> Files:
    docs = Path(config["docs_dir"]).resolve()
    root = docs.parent
    for page in list(files.documentation_pages()):
        text = _FENCE.sub("", Path(page.abs_src_path).read_text(encoding="utf-8"))
        for url in _LINK.findall(text):
            path = url.split("#", 1)[0].split("?", 1)[0]
            if not path or "://" in path or path.startswith(("/", "mailto:")):
                continue
            target = posixpath.normpath(posixpath.join(posixpath.dirname(page.src_uri), path))
            if not target.startswith("../") or files.get_file_from_path(target) is not None:
                continue
            source = (docs / target).resolve()
            if root not in source.parents or not source.is_file():
                continue  # left to MkDocs, which reports the broken link
            files.append(
                _RepoFile(
                    target,
                    str(docs),
                    config["site_dir"],
                    config["use_directory_urls"],
                    dest_uri="repo/" + source.relative_to(root).as_posix(),
                    inclusion=InclusionLevel.NOT_IN_NAV,  # else ".*" excludes "../"
                )
            )
    return files
