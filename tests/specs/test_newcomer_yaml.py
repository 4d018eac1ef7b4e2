"""What the YAML says of the user's own code is checked before anything runs (issue 41), replayed
on the ferry desk of `tests/helpers/ferry.py` as a stranger would break it: a `tool_called`
argument the tool's parameter type refuses (a value outside its `Literal`, a number for text, a
YAML date), a persona template naming a fact the task nearly has (`{known.nme}`), a rule
condition that does not exist (`matchs`), an agent prompt quoting a domain text that is never
filled (`{domain.polcy}`). `harness validate` and `harness run-eval` both refuse each with exit 2
and one located line (file:line:col, the field, what was expected), and no traceback.

The ferry project registers its domain as a plug-in, which lives as long as its process, so the
commands run in subprocesses (`run_harness`), in the project's folder."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_harness
from tests.helpers.ferry import DOMAIN, FILES, write_ferry_project

BOOK_CAR, BOOK_FOOT, TRAVELLER = (
    FILES["tasks/book-car.yaml"],
    FILES["tasks/book-foot.yaml"],
    FILES["personas/traveller.yaml"],
)
SPEC_FOLDERS = ("tasks", "personas", "agents")


def validate(project: Path) -> subprocess.CompletedProcess[str]:
    return run_harness("validate", *SPEC_FOLDERS, cwd=project)


def run_eval(project: Path, agent: str = "agents/desk.yaml") -> subprocess.CompletedProcess[str]:
    return run_harness("run-eval", "--tasks", "tasks", "--agent", agent, cwd=project)


def problems(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The located problem lines a command printed (not its `N valid, M invalid` tally)."""
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    return [
        line
        for line in done.stderr.splitlines()
        if line.strip() and not line.endswith(" invalid") and ": warning: " not in line
    ]


def refused(project: Path, line: str) -> None:
    """`validate` and `run-eval` both exit 2 with exactly `line`, and nothing is played."""
    checked = validate(project)
    assert checked.returncode == 2, checked.stdout + checked.stderr
    assert problems(checked) == [line]
    played = run_eval(project)
    assert played.returncode == 2, played.stdout + played.stderr
    assert problems(played) == [line]
    assert "pipeline" not in played.stdout + played.stderr
    assert not (project / ".harness" / "results.db").exists()


def test_the_unbroken_ferry_project_validates_and_runs(tmp_path: Path) -> None:
    """The baseline of every mistake below: the values, templates and conditions as written
    (a Literal value the tool takes, `{known.name}`, `matches`) are all accepted."""
    project = write_ferry_project(tmp_path)
    checked = validate(project)
    assert checked.returncode == 0, checked.stderr
    assert problems(checked) == []
    played = run_eval(project)
    assert played.returncode == 0, played.stderr
    assert "pass rate 100.0% (3/3 episodes" in played.stdout


def test_a_tool_called_value_outside_the_tools_literal_is_refused(tmp_path: Path) -> None:
    """Before: `vehicle: boat` passed validate and book-car could never pass. The tool's
    parameter is `Literal["none", "car", "bicycle"]`: no call of it carries 'boat'."""
    broken = BOOK_CAR.replace("args: {vehicle: car}", "args: {vehicle: boat}")
    project = write_ferry_project(tmp_path, {"tasks/book-car.yaml": broken})
    refused(
        project,
        "tasks/book-car.yaml:17:12: checks[0].args.vehicle: tool 'book_ticket' refuses this "
        "'vehicle': input should be 'none', 'car' or 'bicycle', found 'boat'",
    )


def test_a_number_for_a_text_parameter_is_refused(tmp_path: Path) -> None:
    """`traveller: 5` where the tool takes `traveller: str`: the tool refuses 5 (pydantic does
    not read a number as text), so no call matches."""
    broken = BOOK_FOOT.replace("traveller: Ada,", "traveller: 5,")
    project = write_ferry_project(tmp_path, {"tasks/book-foot.yaml": broken})
    refused(
        project,
        "tasks/book-foot.yaml:17:29: checks[0].args.traveller: tool 'book_ticket' refuses this "
        "'traveller': input should be a valid string, found 5",
    )


def test_a_yaml_date_for_a_call_argument_is_refused_with_the_quoted_fix(tmp_path: Path) -> None:
    """An unquoted date is a date to YAML; a call's arguments are JSON text, never a date."""
    broken = BOOK_FOOT.replace("traveller: Ada,", "traveller: 2026-11-20,")
    project = write_ferry_project(tmp_path, {"tasks/book-foot.yaml": broken})
    refused(
        project,
        "tasks/book-foot.yaml:17:29: checks[0].args.traveller: a YAML date never equals a "
        "call's JSON text; quote it: '2026-11-20'",
    )


def test_a_value_the_tool_reads_as_its_type_is_accepted(tmp_path: Path) -> None:
    """Exact, not strict: a tool reads `"2"` as the int 2 (its calls are validated in pydantic's
    lax mode), so a check may expect the text a caller sent; 'two' it never reads."""
    counted = DOMAIN.rstrip("\n") + (
        "\n\n    @tool\n    def hold_seats(self, sailing_id: str, count: int) -> str:\n"
        '        """Hold seats on a sailing."""\n        return "held"\n'
    )
    check = "  - kind: tool_called\n    tool: hold_seats\n    args: {count: COUNT}\n    min_count: 0\n    max_count: 1\n"
    project = write_ferry_project(
        tmp_path,
        {"ferry.py": counted, "tasks/book-car.yaml": BOOK_CAR + check.replace("COUNT", "'2'")},
    )
    checked = validate(project)
    assert checked.returncode == 0, checked.stderr
    (project / "tasks/book-car.yaml").write_text(BOOK_CAR + check.replace("COUNT", "two"))
    checked = validate(project)
    assert checked.returncode == 2
    assert problems(checked) == [
        "tasks/book-car.yaml:23:12: checks[2].args.count: tool 'hold_seats' refuses this "
        "'count': input should be a valid integer, unable to parse string as an integer, "
        "found 'two'"
    ]


def test_a_tool_described_by_data_judges_a_value_by_its_json_schema() -> None:
    """A replayed production tool has no Python signature: its JSON schema, which validates its
    calls, decides; a partial mapping may leave out required keys, not break a type."""
    from harness.domains.replay import ReplayEnvironment
    from harness.sim.cross_references import refused_arguments
    from harness.transcript import ToolSpec

    parameters = {
        "type": "object",
        "properties": {
            "vehicle": {"enum": ["none", "car"]},
            "who": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                "required": ["name", "age"],
            },
        },
    }
    domain = ReplayEnvironment.with_tools([ToolSpec(name="book", parameters=parameters)])
    assert refused_arguments(domain, "book", "vehicle", "car") == []
    assert refused_arguments(domain, "book", "vehicle", "boat") == [
        ((), "tool 'book' refuses this 'vehicle': 'boat' is not one of ['none', 'car']")
    ]
    assert refused_arguments(domain, "book", "who", {"name": "Ada"}) == []
    assert refused_arguments(domain, "book", "who", {"age": "old"}) == [
        (("age",), "tool 'book' refuses this 'who': 'old' is not of type 'integer'")
    ]


def test_a_gold_action_value_the_tool_refuses_is_refused(tmp_path: Path) -> None:
    """A gold action is replayed through the tool: one it refuses never reaches the state."""
    gold = "gold_actions:\n  - tool: book_ticket\n    arguments: {sailing_id: S-1, traveller: Bo, vehicle: van}\n"
    project = write_ferry_project(tmp_path, {"tasks/book-car.yaml": BOOK_CAR + gold})
    refused(
        project,
        "tasks/book-car.yaml:23:49: gold_actions[0].arguments.vehicle: tool 'book_ticket' "
        "refuses this 'vehicle': input should be 'none', 'car' or 'bicycle', found 'van'",
    )


def test_a_persona_template_naming_a_misspelt_fact_is_refused(tmp_path: Path) -> None:
    """Before: `{known.nme}` made the rule silently never fire (the tasks know `name`). Now one
    line in the persona's file, once for the three tasks that play it, names the placeholder,
    the task's facts and the fix."""
    broken = TRAVELLER.replace("{known.name}", "{known.nme}")
    project = write_ferry_project(tmp_path, {"personas/traveller.yaml": broken})
    refused(
        project,
        "personas/traveller.yaml:8:5: scripted_turns[1].reply: `{known.nme}` names no fact of "
        "the task (its scenario.known_info has name): did you mean `{known.name}`?",
    )


def test_a_fact_only_some_tasks_hold_is_no_typo(tmp_path: Path) -> None:
    """A persona shared by many tasks may read a fact only some of them hold (`{known.cabin}`:
    no task's fact comes close); the rule gives way to the next where it cannot fill, as
    documented, so it is not refused."""
    cabin = TRAVELLER.replace(
        '  - reply: "I am',
        '  - when: {agent_said: \'(?i)cabin\'}\n    reply: "Cabin {known.cabin}."\n  - reply: "I am',
    )
    project = write_ferry_project(tmp_path, {"personas/traveller.yaml": cabin})
    checked = validate(project)
    assert checked.returncode == 0, checked.stderr
    assert problems(checked) == []


def test_an_inline_personas_misspelt_fact_is_located_in_the_task(tmp_path: Path) -> None:
    inline = BOOK_FOOT.replace(
        "persona: traveller\n",
        'persona:\n  name: walker\n  scripted_turns:\n    - reply: "I am {known.nam}. ###STOP###"\n',
    )
    project = write_ferry_project(tmp_path, {"tasks/book-foot.yaml": inline})
    refused(
        project,
        "tasks/book-foot.yaml:9:7: persona.scripted_turns[0].reply: `{known.nam}` names no fact "
        "of the task (its scenario.known_info has name): did you mean `{known.name}`?",
    )


@pytest.mark.parametrize(
    ("when", "line"),
    [
        (
            '{matchs: "(?i)anything else"}',
            "personas/traveller.yaml:6:12: scripted_turns[0].when.matchs: unknown field "
            "'matchs'; did you mean 'matches'?",
        ),
        (
            "{known: {name: Bo}}",
            "personas/traveller.yaml:6:12: scripted_turns[0].when.known: unknown field 'known'; "
            "expected one of: matches, user, history, system, turn, tool, result, error, "
            "agent_said, agent_history, i_said",
        ),
        (
            '"(?i)anything else"',
            "personas/traveller.yaml:6:5: scripted_turns[0].when: Input should be a mapping "
            "(`name: value` lines or `{name: value}`), found '(?i)anything else'",
        ),
    ],
)
def test_a_rule_condition_that_does_not_exist_is_refused(
    tmp_path: Path, when: str, line: str
) -> None:
    """A `when:` naming no condition (a misspelt one, or a fact of the task, which conditions
    do not read) would make the rule hold on nothing: refused where it is written."""
    broken = TRAVELLER.replace('{matches: "(?i)anything else"}', when)
    project = write_ferry_project(tmp_path, {"personas/traveller.yaml": broken})
    refused(project, line)


def test_a_template_naming_what_its_rule_never_has_is_refused(tmp_path: Path) -> None:
    """Before: a warning, exit 0, and a run whose persona never said it. `{m.1}` reads a group
    the `matches` regex does not have; `{agent_sad.0}` a condition that does not exist."""
    broken = TRAVELLER.replace('reply: "No, thanks. ###STOP###"', 'reply: "No {m.1}. ###STOP###"')
    project = write_ferry_project(tmp_path, {"personas/traveller.yaml": broken})
    refused(
        project,
        "personas/traveller.yaml:7:5: scripted_turns[0].reply: never fires: `{m.1}`: the "
        "`matches` regex has no group '1'",
    )
    broken = TRAVELLER.replace("{known.name}", "{agent_sad.0}")
    (project / "personas/traveller.yaml").write_text(broken)
    checked = validate(project)
    assert checked.returncode == 2
    assert problems(checked) == [
        "personas/traveller.yaml:8:5: scripted_turns[1].reply: never fires: `{agent_sad.0}`: "
        "templates read only m, u, h, agent_said, agent_history, i_said, result, text, args, "
        "known; did you mean 'agent_said'?"
    ]


def test_an_agent_prompt_quoting_a_misspelt_domain_text_is_refused(tmp_path: Path) -> None:
    """`{domain.polcy}` reached the model as written, without the policy it meant to quote."""
    agent = (
        "kind: agent\nname: llm-desk\nmodel: openai/gpt-4.1-mini\n"
        'system_prompt: "You sell ferry tickets. {domain.polcy}"\n'
        "tools: [find_sailings, book_ticket]\n"
    )
    project = write_ferry_project(tmp_path, {"agents/llm.yaml": agent})
    line = (
        "agents/llm.yaml:4:1: system_prompt: `{domain.polcy}` is never filled: a prompt quotes "
        "only `{domain.policy}` and `{domain.description}`; did you mean `{domain.policy}`?"
    )
    checked = validate(project)
    assert checked.returncode == 2
    assert problems(checked) == [line]
    played = run_eval(project, "agents/llm.yaml")
    assert played.returncode == 2
    assert problems(played) == [line]


def test_a_first_message_with_a_fact_template_is_refused(tmp_path: Path) -> None:
    """`first_message: I am {known.name}` reached the agent as written: it fills no templates."""
    broken = BOOK_CAR.replace("first_message: I am Bo,", "first_message: I am {known.name},")
    project = write_ferry_project(tmp_path, {"tasks/book-car.yaml": broken})
    refused(
        project,
        "tasks/book-car.yaml:12:3: start.first_message: `{known.name}` would reach the agent as "
        "written: the first message fills no templates (a scripted persona's replies do); write "
        "the fact itself",
    )


def test_validate_with_no_path_checks_the_projects_specs_and_not_its_project_file(
    tmp_path: Path,
) -> None:
    """A newcomer types `harness validate` (or `validate .`) in their project: every spec is
    checked, the project file and hidden folders (the results store's `.harness/`) are not
    read as specs."""
    project = write_ferry_project(tmp_path)
    (project / ".harness").mkdir()
    (project / ".harness" / "notes.yaml").write_text("not: a spec\n")
    for command in (("validate",), ("validate", ".")):
        done = run_harness(*command, cwd=project)
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.strip().endswith("6 valid, 0 invalid"), done.stdout
        assert "harness.yaml" not in done.stdout + done.stderr
        assert "notes.yaml" not in done.stdout + done.stderr
