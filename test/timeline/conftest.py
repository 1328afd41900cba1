"""pytest setup for the chorus-timeline tool tests.

The tool under test is CHORUS_TIMELINE_TOOL (e.g. build/bin/chorus-timeline), defaulting to
timeline/tools/chorus_timeline.py in this checkout. A path ending in .py runs under the Python
running pytest; anything else is executed directly.
"""

import os
import subprocess
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def tool_command():
    path = os.environ.get("CHORUS_TIMELINE_TOOL",
                          os.path.join(REPO_ROOT, "timeline", "tools", "chorus_timeline.py"))
    path = os.path.abspath(path)
    return [sys.executable, path] if path.endswith(".py") else [path]


@pytest.fixture(scope="session")
def run_tool():
    """run_tool(*args) -> CompletedProcess with text stdout/stderr; never raises on rc != 0."""
    command = tool_command()

    def run(*args):
        return subprocess.run(command + [str(a) for a in args], capture_output=True, text=True)

    return run
