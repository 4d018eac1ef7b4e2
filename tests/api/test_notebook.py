"""The example notebook (examples/api.ipynb) runs top to bottom in a real Jupyter kernel,
offline, as a user would open it: the library API inside a running event loop."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT


def test_the_example_notebook_runs(tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    # a copy of the checkout's inputs, so that its store is the test's own
    for name in ("tasks", "personas", "agents", "ci", "examples"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns(".harness"))
    notebook = nbformat.read(tmp_path / "examples/api.ipynb", as_version=4)
    client = nbclient.NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": tmp_path}}
    )
    client.execute()
    text = "\n".join(
        str(output.get("text") or output.get("data", {}).get("text/plain", ""))
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
    )
    assert "clustered by 8 tasks" in text  # the run's interval, and its unit
    assert "gate passed" in text or "gate failed" in text
    html = [
        output["data"]["text/html"]
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if "text/html" in output.get("data", {})
    ]
    assert any("suite of 8 tasks" in page for page in html)  # _repr_html_ of the results
    assert any("clustered by 8 tasks" in page for page in html)  # a RunResult
    assert any("verdict: " in page and "flipped to pass" in page for page in html)  # compare
    assert any(page.startswith("<b>gate ") for page in html)  # the gate's decision
    assert (tmp_path / ".harness/notebook.db").is_file()
