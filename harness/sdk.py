"""Everything a plug-in imports, from one module: a domain (`Environment`, `@tool`), a check kind
(`CheckBase`, `@register_check`, `Finding`), a model provider (`@register_provider`), and the
`Transcript` a check reads.

    from typing import Literal
    from harness.sdk import CheckBase, Environment, Finding, register_check, register_domain, tool

    @register_domain                              # tasks say `domain: bookshop`
    class Bookshop(Environment):
        domain = "bookshop"
        description = "A bookshop's counter."     # given to the simulated user and the judge

        @tool
        def stock(self, title: str) -> int:
            \"\"\"Copies of a title in stock.\"\"\"   # the tool's description for the agent
            return self.state["stock"].get(title, 0)

    class MentionsTitle(CheckBase):               # tasks list `- kind: mentions_title`
        kind: Literal["mentions_title"]
        title: str

    @register_check(MentionsTitle)
    def mentions_title(spec: MentionsTitle, transcript, context) -> Finding:
        said = " ".join(transcript.assistant_texts())
        return Finding("pass" if spec.title in said else "fail", f"'{spec.title}' named")

A module like this registers when imported: list it under `plugins:` in harness.yaml, or name it
in an installed package's entry points (`harness.domains`, `harness.checks`,
`harness.providers`). `harness schema domain` prints the domain API in full.

- A domain raises `ToolError` for a refusal the agent sees, `ToolUnavailable` (or lets a
  `ToolTimeout` happen) when the tool's back end failed: an error of the tool side, never the
  agent's fail; any other exception reaches the agent as `Error: ValueError: bad date`. A tool's
  parameters are described by `Annotated[str, Field(description="...")]` or the docstring's
  `Args:` section. A domain that also plays tasks made from production traces mixes in
  `TraceReplay` (`class Shop(TraceReplay, Environment)`) for its hooks.
- A check kind whose fields name tools, files or state paths overrides `references()` to return
  `References`, so `harness validate` checks them. Its handler gets the spec, the `Transcript`
  and a `CheckContext` (the task, the model runtime for judges) and returns a `Finding`. Its
  class declares what it needs: `uses_judge = True` when the handler asks the run's judge
  (`context.judge_model`; a `model` field, when set, names the check's own), so a run that
  names no judge stops before it plays and the gate's judge rule counts it; `runs_code = True`
  when it runs code the task ships (refused without OS isolation); `passes_when`, one line
  saying when it passes (`harness.grading.checks.kind_table` lists the kinds).
- A provider is a class registered under its model ids' prefix (`@register_provider("myllm")`
  serves `myllm/<model>`), with a `policy = ProviderPolicy(...)`, a `from_ref(ref: ModelRef,
  options)` constructor and `async complete(messages, tools, params: CompletionParams) ->
  Completion`; it raises `ModelError` (`retryable=True` for 429s, 5xx and timeouts).

The same names stay importable from their modules (`harness.domains`, `harness.grading.checks`,
`harness.specs.checks`, `harness.models`, ...); this module only gathers them.
"""

from harness.domains import (
    Environment,
    ToolError,
    ToolTimeout,
    ToolUnavailable,
    TraceReplay,
    register_domain,
    tool,
)
from harness.grading.checks import CheckContext, register_check
from harness.grading.result import Finding
from harness.models.base import (
    ChatModel,
    Completion,
    CompletionParams,
    ModelError,
    ProviderPolicy,
    register_provider,
)
from harness.specs.agent import ModelRef
from harness.specs.checks import CheckBase, References
from harness.transcript import Message, ToolCall, ToolSpec, Transcript, Usage

__all__ = [
    "ChatModel",
    "CheckBase",
    "CheckContext",
    "Completion",
    "CompletionParams",
    "Environment",
    "Finding",
    "Message",
    "ModelError",
    "ModelRef",
    "ProviderPolicy",
    "References",
    "ToolCall",
    "ToolError",
    "ToolSpec",
    "ToolTimeout",
    "ToolUnavailable",
    "TraceReplay",
    "Transcript",
    "Usage",
    "register_check",
    "register_domain",
    "register_provider",
    "tool",
]
