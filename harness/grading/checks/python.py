"""`python`: checker code shipped with the task, run in the sandbox (VerIF style)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from harness.grading.checks import CheckContext, register_check
from harness.grading.result import Finding, Outcome
from harness.grading.sandbox.result import MAX_MEMORY_MB, MAX_TIMEOUT_S
from harness.imports import defined_names
from harness.specs.checks import CheckBase, References
from harness.specs.located import PathKey, display
from harness.specs.validation import suggestion
from harness.transcript import Transcript


class PythonCheck(CheckBase):
    """Checker code shipped with the task (VerIF style), run in a sandbox: a function of the
    transcript (as JSON data) returning bool, a score in [0, 1], or (bool or score, reason)."""

    kind: Literal["python"]
    passes_when: ClassVar[str] = (
        "checker code (`code:` or `file:`) returns true, a score at or above `threshold`, or "
        "`(bool, reason)`: `check(transcript)` gets the transcript as JSON data, VerInstruct's "
        "`check_following(instruction, response)` the task's instructions and the final reply"
    )
    runs_code: ClassVar[bool] = True
    code: str | None = Field(default=None, description="The checker's source code.")
    file: str | None = Field(
        default=None, description="A file with the checker's code, relative to the task file."
    )
    function: str = Field(
        default="check",
        description="Function to call: `check(transcript)`, or VerInstruct's "
        "`check_following(instruction, response)` with the task's instructions and the "
        "agent's final reply.",
    )
    threshold: float = Field(
        default=1.0, ge=0, le=1, description="Lowest score that passes, when a score is returned."
    )
    timeout_s: float = Field(
        default=10, gt=0, le=MAX_TIMEOUT_S, description="Wall-time limit, at most 300 seconds."
    )
    memory_mb: int = Field(
        default=512, ge=64, le=MAX_MEMORY_MB, description="Address-space limit, at most 4096 MB."
    )

    @model_validator(mode="after")
    def _code_or_file(self) -> PythonCheck:
        if (self.code is None) == (self.file is None):
            raise ValueError("give exactly one of 'code' or 'file'")
        if self.code is not None and not self.code.strip():
            raise ValueError("'code' is empty")
        return self

    def references(self) -> References:
        return References(files={("file",): self.file} if self.file is not None else {})

    def reference_problems(self) -> dict[PathKey, str]:
        """The code must compile and define `function`; read, never run, when the task loads."""
        field: PathKey = ("code",) if self.code is not None else ("file",)
        source = "the code" if self.code is not None else display(Path(self.file or ""))
        try:
            text = self.code if self.code is not None else Path(self.file or "").read_text()
            names = defined_names(text, self.file or "<code>")
        except SyntaxError as exc:
            return {field: f"invalid Python: {exc.msg} (line {exc.lineno} of {source})"}
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            return {field: f"cannot read the checker: {exc}"}
        if names is None or self.function in names:
            return {}
        known = sorted(name for name in names if not name.startswith("_"))
        hint = f"; {suggestion(self.function, known)}" if known else ""
        return {("function",): f"{source} defines no top-level function '{self.function}'{hint}"}


VERINSTRUCT = "check_following"

CHECK_INPUT = f"""What a `python` check's function is called with, in a sandbox (standard library \
only, no network, within timeout_s and memory_mb). `check(transcript)`, and any `function:` \
other than `{VERINSTRUCT}`, gets one argument: the episode's transcript as JSON data (dicts and \
lists), every field present, as this schema describes (e.g. transcript["messages"][-1]["content"], \
transcript["final_state"]). VerInstruct's `{VERINSTRUCT}(instruction, response)` gets two \
strings instead: the task's scenario.instructions (scenario.reason when it has none) and the \
agent's final reply (its last non-empty assistant message; "" when there is none). Either \
returns a bool, a score in [0, 1] (passing from `threshold`), or a pair (bool or score, reason)."""


def check_input_schema() -> dict[str, Any]:
    """The JSON Schema of the transcript a check receives, for those who write checkers: the
    Transcript as `arguments` serialises it, where every field is present (defaults too), with
    `CHECK_INPUT` as its description."""
    schema = Transcript.model_json_schema(mode="serialization")
    for model in [schema, *schema.get("$defs", {}).values()]:
        if "properties" in model:
            model["required"] = list(model["properties"])
    schema.pop("description", None)
    head = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "python check input",
        "description": CHECK_INPUT,
    }
    return {**head, **{key: value for key, value in schema.items() if key != "title"}}


def arguments(spec: PythonCheck, transcript: Transcript, context: CheckContext) -> list[Any]:
    """`check(transcript)` gets the transcript as JSON data; VerInstruct's
    `check_following(instruction, response)` gets the task's instructions and the final reply."""
    if spec.function == VERINSTRUCT:
        scenario = context.task.scenario
        replies = transcript.assistant_texts()
        return [scenario.instructions or scenario.reason, replies[-1] if replies else ""]
    return [transcript.model_dump(mode="json")]


def interpret(value: Any, threshold: float) -> Finding:
    """A checker's return value: bool, score in [0, 1], or (bool or score, reason)."""
    reason = ""
    if isinstance(value, list) and len(value) == 2 and isinstance(value[1], str):
        value, reason = value
    if isinstance(value, bool):
        return Finding("pass" if value else "fail", reason or f"checker returned {value}")
    if isinstance(value, int | float) and 0 <= value <= 1:
        outcome: Outcome = "pass" if value >= threshold else "fail"
        return Finding(
            outcome, reason or f"score {value:g} (threshold {threshold:g})", score=float(value)
        )
    return Finding(
        "error",
        f"checker returned {value!r}; expected a bool, a score in [0, 1], "
        "or (bool or score, reason)",
    )


UNSANDBOXED_NOTE = " [unsandboxed: checker code ran without OS isolation]"


@register_check(PythonCheck)
async def check_python(spec: PythonCheck, transcript: Transcript, context: CheckContext) -> Finding:
    from harness.grading.sandbox import UNSANDBOXED, SandboxLimits, run_checker

    code = spec.code if spec.code is not None else Path(spec.file or "").read_text()
    limits = SandboxLimits(wall_s=spec.timeout_s, memory_mb=spec.memory_mb)
    args = arguments(spec, transcript, context)
    result = await run_checker(code, spec.function, args, limits, unsafe=context.unsafe_checkers)
    if result.ok:
        found = interpret(result.value, spec.threshold)
    else:
        found = Finding("error", f"checker failed: {result.error}")
    # A verdict of code that ran with no boundary says so wherever it is read.
    note = UNSANDBOXED_NOTE if result.backend == UNSANDBOXED else ""
    return dataclasses.replace(
        found,
        reason=found.reason + note,
        sandbox=result.backend or None,
        limits=result.limits or None,
    )
