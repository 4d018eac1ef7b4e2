"""JUnit XML: one test case per task of each reported run (failures name the failed checks),
plus one case per gate decision, so CI systems show them like test results."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from harness.report.contents import ReportContents
from harness.report.paths import relative_paths
from harness.report.summary import run_figures
from harness.store import Store


def write_junit(store: Store, report: ReportContents, path: Path) -> None:
    """Write the report's runs (gated runs first) and gate decisions as JUnit XML."""
    suites = ET.Element("testsuites", name="harness")
    gated = [gate.candidate_run for gate in report.gates]
    for run_id in dict.fromkeys([*gated, *(run.run_id for run in report.runs)]):
        figures = run_figures(store, run_id)
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=f"{figures.variant} {figures.run_id}",
            tests=str(len(figures.tasks)),
        )
        failures = errors = 0
        for line in figures.tasks:
            case = ET.SubElement(suite, "testcase", classname=figures.variant, name=line.task_id)
            if line.failed:
                failures += 1
                checks = ", ".join(line.failed_checks)
                ET.SubElement(
                    case, "failure", message=f"{line.failed}/{line.trials} trials failed: {checks}"
                ).text = checks
            elif line.errors:
                errors += 1
                ET.SubElement(case, "error", message=", ".join(line.error_reasons))
        suite.set("failures", str(failures))
        suite.set("errors", str(errors))
    for gate in report.gates:
        suite = ET.SubElement(
            suites,
            "testsuite",
            name="gate",
            tests="1",
            failures="1" if gate.blocks else "0",
            errors="0",
        )
        case = ET.SubElement(
            suite,
            "testcase",
            classname="gate",
            name=f"{gate.candidate_variant} vs {gate.baseline_run or 'none'}",
        )
        lines = [*gate.reasons, *(f"UNDECIDED: {line}" for line in gate.undecided)]
        if gate.blocks:
            head = "UNDECIDED: " if gate.status == "undecided" else ""
            ET.SubElement(case, "failure", message=head + "; ".join(lines)).text = "\n".join(lines)
        elif lines:  # undecided under on_undecided: warn: shown, not failed
            ET.SubElement(case, "system-out").text = "\n".join(lines)
    path.parent.mkdir(parents=True, exist_ok=True)
    # no absolute path of the user's machine in a CI artefact (`relative_paths`)
    text = relative_paths(ET.tostring(suites, encoding="unicode"))
    path.write_text(f"<?xml version='1.0' encoding='utf-8'?>\n{text}", encoding="utf-8")
