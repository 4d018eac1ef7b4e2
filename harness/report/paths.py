"""No absolute path of the user's machine in what a report shows: a report is shared (a CI
artefact, a pull-request comment), and the folder it was made in, or the user's home, is no
one else's business and no use to them. Paths under the working folder are shown relative to
it, paths under the home folder from `~`, as the user would type them."""

from __future__ import annotations

import os
import re
from pathlib import Path


def relative_paths(text: str, root: Path | None = None) -> str:
    """`text` with every absolute path under `root` (default: the working folder) made
    relative to it (`/home/ada/ferry/agent.py:respond` -> `agent.py:respond`, the folder itself
    -> `.`), then every path under the home folder written from `~`. A folder that is the
    file system's root, or a prefix of a longer name (`/tmp/ferry` in `/tmp/ferry2`), is left
    alone."""
    for folder, itself in ((root or Path.cwd(), "."), (Path.home(), "~")):
        text = _replace(text, str(folder), itself)
    return text


def _replace(text: str, folder: str, itself: str) -> str:
    """`folder` in `text` written as `itself` ('.' or '~'), a path under it as `itself/rest`
    (relative, for '.': `rest`)."""
    folder = folder.rstrip(os.sep)
    if not folder or folder not in text:
        return text
    pattern = re.compile(re.escape(folder) + r"(?:" + re.escape(os.sep) + r"|(?![\w~-]|\.\w))")
    under = "" if itself == "." else itself + os.sep
    return pattern.sub(lambda found: under if found.group().endswith(os.sep) else itself, text)
