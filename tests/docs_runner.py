"""Run a page's code blocks in order, in one Python namespace (a page reads top-down, as a
tutorial), shell blocks through bash. Used by test_docs.py in a child process:

    python -m tests.docs_runner BLOCKS.json

BLOCKS.json is {"pristine": DIR, "blocks": [{"lang", "source", "where", "lines"}, ...]}; the
working directory is the page's own copy of DIR. ``lines`` runs each line of a shell block
in a fresh copy of DIR (a list of alternatives, each from the same starting point, is
written that way in the README). Exits non-zero naming the first block that failed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import traceback


def _run_shell(source: str, where: str, cwd: str | None = None) -> None:
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", source], capture_output=True, text=True, cwd=cwd)
    if proc.returncode != 0:
        sys.exit(f"{where}: shell block failed (exit {proc.returncode})\n$ {source}\n{proc.stdout}{proc.stderr}")


def main(path: str) -> None:
    with open(path, encoding="utf-8") as f:
        plan = json.load(f)
    blocks, pristine = plan["blocks"], plan["pristine"]
    namespace: dict = {"__name__": "__docs__"}
    for block in blocks:
        where = block["where"]
        if block["lang"] == "python":
            try:
                exec(compile(block["source"], where, "exec"), namespace)
            except BaseException:
                sys.exit(f"{where}: Python block failed\n{block['source']}\n{traceback.format_exc()}")
        elif block["lines"]:
            for line in block["source"].splitlines():
                command = line.split(" #", 1)[0].strip()
                if command and not command.startswith("#"):
                    with tempfile.TemporaryDirectory() as tmp:
                        fresh = shutil.copytree(pristine, f"{tmp}/work", symlinks=True)
                        _run_shell(command, where, cwd=fresh)
        else:
            _run_shell(block["source"], where)


if __name__ == "__main__":
    main(sys.argv[1])
