"""Issue 41: the user's own domain and tool code gets the care YAML gets. Each test copies the
ferry project (tests/helpers/ferry.py), breaks one thing in its Python the way a stranger
would, runs the real command in the project folder and checks what the user sees: the exit
code, the one line naming the file, line and what was expected, and no traceback.

The ferry domain is a `plugins:` module, which registers for the life of a process, so these
run `python -m harness` (`run_harness`); a project whose domain never registers runs in-process
(`run_cli`)."""

from __future__ import annotations

import asyncio
import datetime
import re
from pathlib import Path
from typing import Any

import pytest

from harness.domains import Environment, ToolBroken, tool
from harness.domains.trace_replay import TraceReplay, id_patterns
from harness.imports import BadDefinition
from tests.conftest import run_cli, run_harness
from tests.helpers.ferry import AGENT, DOMAIN, FILES, write_ferry_project

VALIDATE = ("validate", "tasks", "agents", "personas")
RUN_EVAL = ("run-eval", "--tasks", "tasks", "--agent", "agents/desk.yaml")


def broken(old: str, new: str, text: str = DOMAIN) -> str:
    """`text` with one thing changed; the change must apply (a test of nothing fails)."""
    assert old in text, old
    return text.replace(old, new, 1)


def line_of(text: str, fragment: str) -> int:
    """The 1-based line of the first line of `text` that holds `fragment`."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if fragment in line)


def refused(root: Path, command: tuple[str, ...], in_process: bool = False) -> str:
    """Run a command that must refuse the project as bad input: exit 2 and no traceback; the
    one line that names a Python file of the project (`ferry.py:12:...`) is returned."""
    done = run_cli(*command, cwd=root) if in_process else run_harness(*command, cwd=root)
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert "Traceback" not in output, output
    located = [line for line in done.stderr.splitlines() if re.search(r"\w+\.py:\d+", line)]
    assert len(located) == 1, output  # one line, however many tasks use the domain
    return located[0]


SYNTAX = broken("    season: Literal", "    season Literal")
MISSING_IMPORT = broken(
    "from typing import Any, Literal\n", "from typing import Any, Literal\n\nimport requets\n"
)
NOT_AN_ENVIRONMENT = broken("class FerryDesk(Environment):", "class FerryDesk:")
STATE_CALLED = broken("    State = FerryState\n", "    State = FerryState()\n")
STATE_INSTANCE = broken("    State = FerryState\n", "    State = FerryState(sailings={})\n")
NO_NAME = broken('    domain = "ferry"\n', "")
ARGS = broken(
    "def find_sailings(self, route: str)", "def find_sailings(self, *args: Any, **kwargs: Any)"
)
UNTYPED = broken("def find_sailings(self, route: str)", "def find_sailings(self, route)")
HOOKS = broken(
    "    State = FerryState\n",
    "    State = FerryState\n\n"
    '    id_patterns = {"sailing_id": "S-[0-9]+"}\n\n'
    "    @classmethod\n"
    "    def expected_state(cls, calls: Any) -> dict[str, Any]:\n"
    "        return {}\n",
)

# (the broken domain, the line the user must be shown, as a regex; its line in ferry.py)
MISTAKES = {
    "syntax error": (
        SYNTAX,
        r"ferry\.py:{line}:\d+: SyntaxError: invalid syntax$",
        "season Literal",
    ),
    "missing import": (
        MISSING_IMPORT,
        r"ferry\.py:{line}:1: ModuleNotFoundError: No module named 'requets'$",
        "import requets",
    ),
    "not an Environment": (
        NOT_AN_ENVIRONMENT,
        r"ferry\.py:{line}:\d+: FerryDesk: expected an Environment subclass, "
        r"`class FerryDesk\(Environment\)` \(from harness\.sdk import Environment\)$",
        "@register_domain",
    ),
    "State called": (
        STATE_CALLED,
        r"ferry\.py:{line}:\d+: FerryDesk\.State: expected a pydantic model class "
        r"\(`State = FerryState`\), not an instance \(`FerryState\(\)`, which raised "
        r"ValidationError: 1 validation error for FerryState: sailings: Field required\)$",
        "State = FerryState()",
    ),
    "State an instance": (
        STATE_INSTANCE,
        r"ferry\.py:{line}:\d+: FerryDesk\.State: expected a pydantic model class "
        r"\(`State = FerryState`\), not an instance of it",
        "class FerryDesk",
    ),
    "no domain name": (
        NO_NAME,
        r'ferry\.py:{line}:\d+: FerryDesk has no domain name; add `domain = "\.\.\."` to the '
        r"class \(the name tasks give as `domain:`\)$",
        "@register_domain",
    ),
    "tool with *args": (
        ARGS,
        r"ferry\.py:{line}:\d+: FerryDesk\.find_sailings: a tool cannot take \*args; declare "
        r"each argument as a named parameter with a type hint",
        "class FerryDesk",
    ),
    "untyped tool parameter": (
        UNTYPED,
        r"ferry\.py:{line}:\d+: FerryDesk\.find_sailings: tool parameter 'route' has no type "
        r"hint; give it one \(`route: str`, or `route: Any` for any JSON value\)",
        "class FerryDesk",
    ),
    "trace hooks without the mix-in": (
        HOOKS,
        r"ferry\.py:{line}:\d+: FerryDesk defines id_patterns, expected_state, trace hooks that "
        r"a plain Environment does not use; mix in TraceReplay for them to be hooks: "
        r"`class FerryDesk\(TraceReplay, Environment\)`",
        "class FerryDesk",
    ),
}


@pytest.mark.parametrize("command", [VALIDATE, RUN_EVAL], ids=["validate", "run-eval"])
@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_a_broken_domain_plugin_is_bad_input_at_its_line(
    tmp_path: Path, mistake: str, command: tuple[str, ...]
) -> None:
    text, expected, fragment = MISTAKES[mistake]
    root = write_ferry_project(tmp_path, {"ferry.py": text})
    shown = refused(root, command)
    pattern = expected.format(line=line_of(text, fragment))
    assert re.search(pattern, shown), shown
    assert "known: , " not in shown  # an empty domain name is never listed


def test_a_broken_plugin_named_as_a_module_is_located_in_its_file(tmp_path: Path) -> None:
    root = write_ferry_project(
        tmp_path, {"ferry.py": MISSING_IMPORT, "harness.yaml": "plugins: [ferry]\n"}
    )
    line = line_of(MISSING_IMPORT, "import requets")
    assert refused(root, VALIDATE).endswith(
        f"ferry.py:{line}:1: ModuleNotFoundError: No module named 'requets'"
    )


def test_a_task_naming_a_broken_domain_file_says_it_once_at_the_files_line(tmp_path: Path) -> None:
    tasks = {
        name: broken("domain: ferry", "domain: ../ferry.py:FerryDesk", text)
        for name, text in FILES.items()
        if name.startswith("tasks/") and name.endswith(".yaml")
    }
    root = write_ferry_project(
        tmp_path, {"ferry.py": SYNTAX, "harness.yaml": "plugins: []\n", **tasks}
    )
    line = line_of(SYNTAX, "season Literal")
    for command in (VALIDATE, RUN_EVAL):  # nothing registers: in this process
        assert re.fullmatch(
            rf"ferry\.py:{line}:\d+: SyntaxError: invalid syntax",
            refused(root, command, in_process=True),
        )


def test_a_python_agent_whose_module_does_not_import_is_bad_input_at_its_line(
    tmp_path: Path,
) -> None:
    agent = broken("import re\n", "import re\nimport requets\n", AGENT)
    root = write_ferry_project(tmp_path, {"agent.py": agent})
    line = line_of(agent, "import requets")
    assert refused(root, RUN_EVAL).endswith(
        f"agent.py:{line}:1: ModuleNotFoundError: No module named 'requets'"
    )


def test_a_tool_returning_a_set_is_an_error_of_the_tool_never_an_agent_crash(
    tmp_path: Path,
) -> None:
    text = broken(
        '        return [\n            {"sailing_id": key, **sailing}',
        '        return {key for key in self.state["sailings"]} or [\n'
        '            {"sailing_id": key, **sailing}',
    )
    root = write_ferry_project(tmp_path, {"ferry.py": text})
    done = run_harness(*RUN_EVAL, cwd=root)
    output = done.stdout + done.stderr
    assert "crashed" not in output and "Traceback" not in output, output
    reason = "[tool] ToolBroken: tool find_sailings returned a set, which is not JSON"
    assert output.count(reason) == 3, output  # every task's episode: the tool's side
    assert done.returncode == 3, output  # every episode errored on the tool side, none graded


def test_a_tool_that_raises_is_the_tools_error_at_its_line_never_an_agent_crash(
    tmp_path: Path,
) -> None:
    """A bug in a tool (here a misspelt key) is shown to the agent as an error result it may
    act on; the ferry agent does not catch it, so the episode is the tool's error, located in
    the tool's code, and never "the agent crashed"."""
    text = broken('if sailing["route"] == route', 'if sailing["rout"] == route')
    root = write_ferry_project(tmp_path, {"ferry.py": text})
    done = run_harness(*RUN_EVAL, cwd=root)
    output = done.stdout + done.stderr
    assert "agent crashed" not in output and "Traceback" not in output, output
    line = line_of(text, 'sailing["rout"]')
    reason = f"[tool] ToolBroken: tool find_sailings crashed: ferry.py:{line} in <listcomp>"
    assert reason in output, output


def test_an_agent_that_handles_a_tools_bug_goes_on(tmp_path: Path) -> None:
    """The bug reaches the agent's code as a `ToolError`: code that handles refusals handles
    it, and the episode is graded as any other."""
    text = broken('if sailing["route"] == route', 'if sailing["rout"] == route')
    agent = broken(
        '    sailings = tools.call("find_sailings", route=route.group(0))\n',
        "    try:\n"
        '        sailings = tools.call("find_sailings", route=route.group(0))\n'
        "    except ToolError as refusal:\n"
        '        return f"The timetable is down ({refusal}). Anything else?"\n',
        AGENT,
    )
    root = write_ferry_project(tmp_path, {"ferry.py": text, "agent.py": agent})
    done = run_harness(*RUN_EVAL, cwd=root)
    output = done.stdout + done.stderr
    assert "crashed" not in output and "errored" not in output, output
    assert "pass rate 33.3% (1/3 episodes" in output, output  # only the full sailing passes


class Timetable(Environment):
    """A desk whose tools return what JSON lacks, deep in their result."""

    @tool
    def next_departure(self, route: str) -> dict[str, Any]:
        """When the next boat leaves."""
        return {"route": route, "legs": [{"departs": datetime.time(8, 0)}]}

    @tool
    def by_hour(self) -> dict[Any, str]:
        """Sailings by hour."""
        return {8: "S-1", "nine": "S-2"}

    @tool
    def anything(self, value: Any) -> Any:
        """An explicitly untyped parameter: `Any` is a type hint."""
        return value


def test_a_non_json_result_names_the_tool_the_type_and_where() -> None:
    with pytest.raises(
        ToolBroken,
        match=r"tool next_departure returned a time at "
        r"result\['legs'\]\[0\]\['departs'\], which is not JSON",
    ):
        asyncio.run(Timetable({}).call("next_departure", {"route": "north"}))
    with pytest.raises(ToolBroken, match=r"tool by_hour returned a int key at result\[8\]"):
        asyncio.run(Timetable({}).call("by_hour", {}))
    outcome = asyncio.run(Timetable({}).call("anything", {"value": [1, "a"]}))
    assert (outcome.is_error, outcome.content) == (False, '[1, "a"]')


def test_trace_hooks_with_the_mix_in_are_still_hooks() -> None:
    class Crossings(TraceReplay, Environment):
        id_patterns = {"sailing_id": "S-[0-9]+"}

    assert id_patterns(Crossings) == {"sailing_id": "S-[0-9]+"}


def test_a_positional_only_tool_parameter_is_refused_at_definition() -> None:
    with pytest.raises(
        BadDefinition, match=r"Harbour\.moor: tool parameter 'berth' is positional-only"
    ):

        class Harbour(Environment):
            @tool
            def moor(self, berth: str, /) -> str:
                """Moor at a berth."""
                return berth
