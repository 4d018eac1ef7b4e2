"""The report and the help read right (issue 41), replayed on the ferry desk of
`tests/helpers/ferry.py` as a stranger meets them: the report of two runs opens with
"CANDIDATE (run) vs BASELINE (run)" whichever run is named first, and lists the gate's rules
with their figures and verdicts; no artefact (HTML report, Markdown, JUnit, JSON summaries,
export, the stored config shown) holds an absolute path of the user's machine; a long reason is
cut at a word boundary with an ellipsis; `harness gate --help` describes the gate as it decides,
and no command's help breaks a sentence where its source line ended.

The ferry project registers its domain as a plug-in, which lives as long as its process, so the
commands that load it run in subprocesses (`run_harness`), in the project's folder."""

from __future__ import annotations

import io
import json
import re
import subprocess
import tokenize
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest
import typer
from rich.cells import cell_len

from harness.cli import app
from tests.conftest import ROOT, run_cli, run_harness
from tests.helpers.ferry import FILES, write_ferry_project


def no_crash(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stdout + done.stderr, done.stderr


def run_id_of(done: subprocess.CompletedProcess[str]) -> str:
    """The run id a `run-eval` printed ('Run 20261206-...')."""
    found = re.search(r"^Run (\S+)", done.stdout, re.M)
    assert found, done.stdout + done.stderr
    return found.group(1)


@dataclass
class Ferry:
    """Two runs of the ferry desk (desk, the baseline; desk-b, the candidate) and a gate
    decision on them, made with absolute paths in a folder that is also $HOME."""

    home: Path
    project: Path
    store: Path
    baseline: str
    candidate: str
    gate: subprocess.CompletedProcess[str]

    def harness(
        self, *args: str | Path, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        done = run_harness(*map(str, args), cwd=cwd or self.project, HOME=str(self.home))
        no_crash(done)
        return done


@pytest.fixture(scope="module")
def ferry(tmp_path_factory: pytest.TempPathFactory) -> Ferry:
    """Every path given absolute, as a script or a CI job gives them, and $HOME the folder the
    project is in: whatever of either reaches an artefact is found."""
    home = tmp_path_factory.mktemp("home")
    project = write_ferry_project(
        home / "ferry",
        {"agents/desk-b.yaml": FILES["agents/desk.yaml"].replace("name: desk", "name: desk-b")},
    )
    store = project / "results.db"
    ids = []
    for agent in ("desk", "desk-b"):
        done = run_harness(
            "run-eval", "--tasks", str(project / "tasks"), "--agent",
            str(project / "agents" / f"{agent}.yaml"), "--store", str(store), "--no-traces",
            cwd=project, HOME=str(home),
        )  # fmt: skip
        no_crash(done)
        assert done.returncode == 0, done.stdout + done.stderr
        ids.append(run_id_of(done))
    baseline, candidate = ids
    gate = run_harness(
        "gate", "--candidate", candidate, "--baseline", baseline, "--store", str(store),
        "--markdown", str(project / "out" / "gate.md"), "--junit", str(project / "out" / "gate.xml"),
        cwd=project, HOME=str(home),
    )  # fmt: skip
    no_crash(gate)
    assert gate.returncode == 0, gate.stdout + gate.stderr
    return Ferry(home, project, store, baseline, candidate, gate)


# 1. the report's title and the gate's rules -----------------------------------------------


def test_the_report_opens_with_candidate_vs_baseline_and_the_gates_rules(ferry: Ferry) -> None:
    """The newcomer names the baseline first (`report BASELINE --against CANDIDATE`, as the
    help's "A of a comparison" suggests). Before: the title was 'Run BASELINE against
    CANDIDATE' while the page read 'B against A', and the gate showed no rule. Now the title is
    the candidate first, each side by variant and run id, whichever run is named first, and the
    gate's rules are listed with their figures and verdicts."""
    title = f"desk-b ({ferry.candidate}) vs desk ({ferry.baseline})"
    pages = []
    for first, second in ((ferry.baseline, ferry.candidate), (ferry.candidate, ferry.baseline)):
        out = ferry.project / "out" / f"report-{first}.html"
        done = ferry.harness(
            "report", first, "--against", second, "--store", ferry.store, "--out", out
        )
        assert done.returncode == 0, done.stderr
        pages.append(out.read_text())
    for html in pages:
        assert f"<title>{title} - harness</title>" in html
        assert f"<h1>{title}</h1>" in html
        # the text reads the same way: B is the candidate, A the baseline
        assert f"B desk-b ({ferry.candidate}) against A desk ({ferry.baseline})" in html
        assert f"B, the candidate: run {ferry.candidate}: desk-b" in html
        rules = html[html.index('id="gate-rules"') :]
        rules = rules[: rules.index("</div>")]
        for rule in ("errors (candidate)", "tasks", "worse than the baseline", "regression suite"):
            assert f"<td>{rule}</td>" in rules
        assert rules.count("<b>PASS</b>") == 5
        assert "0 of 1 regression-tagged tasks declined; each task tested on its own" in rules
        assert "<th>adjusted p</th>" in rules
        # the decision comes before the runs' details
        assert html.index('id="gate-rules"') < html.index('id="run-0"')


# 2. no absolute path of the user's machine in any artefact --------------------------------


def test_no_artefact_holds_an_absolute_path_of_the_users_machine(ferry: Ferry) -> None:
    """Before: the HTML report's configuration showed the agent's entry as
    '/home/.../agent.py:respond'. Every artefact of the runs, made with absolute paths, is
    rendered in the project's folder and, for the report, from another folder too: neither the
    project's folder nor $HOME appears; the entry reads `agent.py:respond` in the project and
    `~/ferry/agent.py:respond` from elsewhere."""
    out = ferry.project / "out"
    elsewhere = ferry.home / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    shown: dict[str, str] = {}  # the artefacts, not the terminal: it echoes the paths given
    store = ("--store", ferry.store)
    ab = (ferry.baseline, "--against", ferry.candidate)
    ferry.harness("report", *ab, *store, "--out", out / "report.html")
    ferry.harness("report", *ab, *store, "--out", out / "report-elsewhere.html", cwd=elsewhere)
    ferry.harness("compare", ferry.baseline, ferry.candidate, *store, "--markdown", out / "cmp.md")
    commands = {
        "gate --json": (
            "gate",
            "--candidate",
            ferry.candidate,
            "--baseline",
            ferry.baseline,
            *store,
            "--json",
        ),
        "export jsonl": ("export", ferry.baseline, *store),
        "export csv": ("export", ferry.baseline, *store, "--format", "csv"),
        "runs show": ("runs", "show", ferry.baseline, *store),
        "runs show --results": ("runs", "show", ferry.baseline, *store, "--results"),
    }
    for name, args in commands.items():
        done = ferry.harness(*args)
        assert done.returncode == 0, (name, done.stderr)
        shown[name] = done.stdout
    for name in ("report.html", "report-elsewhere.html", "cmp.md", "gate.md", "gate.xml"):
        shown[name] = (out / name).read_text()
    json.loads(shown["gate --json"])  # one JSON object, as before
    for name, text in shown.items():
        for private in (str(ferry.project), str(ferry.home)):
            assert private not in text, (name, text[text.find(private) - 200 :][:400])
    assert '"entry": "agent.py:respond"' in shown["report.html"]
    assert '"entry": "~/ferry/agent.py:respond"' in shown["report-elsewhere.html"]
    assert "entry: agent.py:respond" in shown["runs show"]
    assert "<?xml version='1.0' encoding='utf-8'?>\n<testsuites" in shown["gate.xml"]


# 3. long reasons cut at a word boundary ----------------------------------------------------

WORDS = [f"Zeta{n:02d}" for n in range(60)]  # one length each: a cut word is shorter
A_WORD = re.compile(r"Zeta\d\d…?")


def test_a_long_reason_is_cut_at_a_word_boundary_with_an_ellipsis(tmp_path: Path) -> None:
    """An agent that raises with a long message. Before: the summary table's reason was cut
    mid-word ('Zet…'), and a soft check's reason cut at 60 characters with no ellipsis.
    Now the terminal table (COLUMNS=100) and the HTML report's task table end the reason on a
    whole word followed by an ellipsis."""
    crash = f'    raise RuntimeError("{" ".join(WORDS)}")\n    said = '
    project = write_ferry_project(
        tmp_path, {"agent.py": FILES["agent.py"].replace("    said = ", crash)}
    )
    done = run_harness(
        "run-eval", "--tasks", "tasks", "--agent", "agents/desk.yaml", "--store", "r.db",
        "--no-traces", cwd=project, COLUMNS="100",
    )  # fmt: skip
    no_crash(done)
    cells = [line.split("│")[-2] for line in done.stdout.splitlines() if line.count("│") > 2]
    terminal = " ".join(cells)
    report = run_harness(
        "report", run_id_of(done), "--store", "r.db", "--out", "r.html", cwd=project
    )
    no_crash(report)
    rows = re.findall(r"<td>([^<]*RuntimeError[^<]*)</td>", (project / "r.html").read_text())
    assert rows
    for text in (terminal, *rows):
        assert "…" in text, text  # cut: the message is longer than a cell shows
        found = re.findall(r"Z\w*…?", text)
        assert found and all(A_WORD.fullmatch(word) for word in found), text


# 4. the help ------------------------------------------------------------------------------


def test_gate_help_describes_the_gate_as_it_decides() -> None:
    """Before: the help named one regression rule over the suite (a regressed
    regression-tagged task) and said nothing of the family of tests. Now it names the
    per-task one-sided Fisher exact test, the discrete Bonferroni family, the evidence played
    first and UNDECIDED as never a pass."""
    done = run_cli("gate", "--help", COLUMNS="100")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    for phrase in (
        "First it plays what a rule needs",
        "each regression-tagged task on its own (a one-sided Fisher exact test of its trials "
        "on both sides",
        "one family (discrete Bonferroni)",
        "never a pass",
        "Exit 2 on a bad config",
    ):
        assert phrase in text, phrase


WIDTH = 100


def commands() -> list[list[str]]:
    """Every command line `harness --help` leads to: the groups and their commands."""
    found: list[list[str]] = []

    def walk(command: object, path: list[str]) -> None:
        found.append(path)
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return found


def broken_lines(text: str) -> list[str]:
    """Where the help breaks a line although the next word would have fit on it: a line break
    made by the help's source, not by wrapping to the terminal, so a sentence broke mid-way.
    Checked in the description (outside the boxes, 98 columns) and within a box's help column
    (a continuation line: its first columns blank); a line ending with `[default: ...]` and
    the like, or followed by an option's name, ends an item, not a sentence."""
    found = []
    lines = text.splitlines()
    for line, after in pairwise(lines):
        if not line.strip() or not after.strip():
            continue
        if line.startswith("│") and after.startswith("│"):
            inner, following = line[1:-1], after[1:-1]
            start = len(following) - len(following.lstrip())
            if start <= 1 or start >= len(inner) or inner[start - 1] != " " or inner[start] == " ":
                continue  # not a continuation of the same column
            cell, room = inner[start:].rstrip(), len(inner) - 2 - start
            word = following.split()[0]
        elif line.startswith(" ") and after.startswith(" ") and "Usage:" not in line:
            cell, room, word = line.strip(), WIDTH - 3, after.split()[0]
        else:
            continue
        if cell.endswith("]") or word.startswith(("-", "[")):
            continue
        if cell_len(cell) + 1 + cell_len(word) <= room:
            found.append(f"{cell!r} / {word!r}")
    return found


def test_no_help_breaks_a_sentence() -> None:
    """Every command's --help at 100 columns. Before: Typer's rich help kept the docstring's
    own line breaks in every paragraph but the first, and in the list of commands, so a
    sentence broke wherever its source line ended ('the pass rate with its 95%' / 'interval,
    ...' in `harness --help`, 38 such breaks). Now each paragraph wraps to the terminal."""
    paths = commands()
    assert ["gate"] in paths and ["traces", "to-tasks"] in paths
    broken = {}
    for path in paths:
        done = run_cli(*path, "--help", COLUMNS=str(WIDTH))
        assert done.returncode == 0, (path, done.stderr)
        if found := broken_lines(done.stdout):
            broken[" ".join(path) or "harness"] = found
    assert not broken


def test_the_checker_finds_a_sentence_broken_where_its_source_line_ended() -> None:
    """The check above fails on what it exists to find: a docstring's line break kept."""
    text = (
        " Write a run's HTML report: pass rate with its interval per level and tag, errors, cost\n"
        " and time.\n"
        "│ history      The trend of gated runs, per variant and week: the decisions, the pass │\n"
        "│              rate with its 95%                                                      │\n"
        "│              interval.                                                              │\n"
    )
    assert len(broken_lines(text)) == 2


def glued(path: Path) -> list[str]:
    """String literals written one after the other (implicit concatenation, as a long help
    string is) where neither side has the space between two words."""
    tokens = [
        t
        for t in tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
        if t.type not in (tokenize.NL, tokenize.COMMENT)
    ]

    def literal(token: str) -> str:
        body = token.lstrip("rRbBuUfF")
        quote = 3 if body[:3] in ('"""', "'''") else 1
        return body[quote:-quote]

    found = []
    for first, second in pairwise(tokens):
        if first.type == second.type == tokenize.STRING:
            left, right = literal(first.string), literal(second.string)
            if (
                left
                and right
                and (left[-1].isalnum() or left[-1] in ".,;:)")
                and not left.endswith("\\n")
                and right[0].isalnum()
            ):
                found.append(f"{path.name}:{first.start[0]}: {left[-20:]!r} {right[:20]!r}")
    return found


def test_no_help_string_glues_two_words() -> None:
    """A help string split over source lines keeps the space between its words."""
    assert glued_in_commands() == []


def glued_in_commands() -> list[str]:
    return [
        found for path in sorted((ROOT / "harness" / "cli").glob("*.py")) for found in glued(path)
    ]


def test_the_glue_check_finds_two_words_glued(tmp_path: Path) -> None:
    source = tmp_path / "command.py"
    source.write_text(
        'HELP = (\n    "Compare runs of different suites on the tasks both"\n    "played, listed."\n)\n'
    )
    found = glued(source)
    assert len(found) == 1 and found[0].startswith("command.py:2: ") and "played" in found[0]
