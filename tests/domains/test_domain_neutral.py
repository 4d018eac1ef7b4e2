"""A domain-neutral core: only the bundled support desk speaks of customers, orders and refunds.

Everything else takes its domain wording from the task, the persona or the domain (its
`description` and `policy`), so that a user's own domain reads as itself to the simulated user
and to the judge.
"""

from __future__ import annotations

import asyncio
import io
import re
import tokenize
from pathlib import Path

from harness.domains import Environment, tool
from harness.grading.checks import CheckContext, run_check
from harness.grading.judge import criterion_prompt, pairwise_prompt
from harness.grading.relative import compare_pair
from harness.models import Completion, CompletionParams, ModelRef, ModelRuntime
from harness.sim.user import user_system_prompt
from harness.specs.checks import CheckBase
from harness.specs.persona import Persona
from harness.specs.task import Scenario, Task
from harness.transcript import EndReason, Message, ToolSpec, Transcript
from tests.conftest import ROOT

# The support desk's vocabulary, as whole words in any case.
SUPPORT_WORDS = re.compile(
    r"\b(?:customers?|customer service|refunds?|refunded|orders?|order_ids?|support agents?"
    r"|shipping|cancellations?|desk)\b",
    re.IGNORECASE,
)
# "order" in the sense of a sequence, not of a purchase: "in order", "in start order", "in the
# order asked", "in both orders", "in a given order", "key order", SQL's "ORDER BY" (but not
# "in your order" or "in an order").
ORDERING = re.compile(
    r"\bin (?!(?:an?|your|my|each|every|one)\b)(?:\w+ )?orders?\b"
    r"|\b(?:both|given|same|key|sort|topological|insertion|reverse) orders?\b|\border by\b",
    re.IGNORECASE,
)
# Where domain words belong: the bundled example domain and the project templates.
EXEMPT_FILES = "harness/domains/support*.py"
EXEMPT_FOLDER = ("harness", "scaffold")
# (file, word) -> why the word is not the support desk's there.
ALLOWED = {
    ("harness/domains/describe.py", "desk"): "the API guide's example is a user's IT help desk",
}
TEXT_TOKENS = {tokenize.STRING, tokenize.COMMENT} | {
    getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)  # f-strings on Python >= 3.12
}
FIELDS = re.compile(r"\{[^{}]*\}")  # an f-string's replacement fields are code, not wording


def wording(token: tokenize.TokenInfo) -> str:
    """The token's text, with what is not wording blanked out (offsets and lines kept)."""
    text = token.string
    if token.type == tokenize.STRING and re.match(r"[a-zA-Z]*[fF]", text):
        text = FIELDS.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)
    return ORDERING.sub(lambda m: "-" * len(m.group()), text)


def support_words(root: Path) -> list[str]:
    """`file:line: word` for each support-desk word in the string literals and comments of the
    generic packages under `root/harness` (code, such as a variable named `order`, is not read)."""
    hits = []
    for path in sorted((root / "harness").rglob("*.py")):
        relative = path.relative_to(root)
        if relative.match(EXEMPT_FILES) or relative.parts[:2] == EXEMPT_FOLDER:
            continue
        tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
        for token in tokens:
            if token.type not in TEXT_TOKENS:
                continue
            text = wording(token)
            for found in SUPPORT_WORDS.finditer(text):
                if (relative.as_posix(), found.group().lower()) in ALLOWED:
                    continue
                line = token.start[0] + text.count("\n", 0, found.start())
                hits.append(f"{relative}:{line}: {found.group()}")
    return hits


def test_generic_packages_hold_no_support_desk_words() -> None:
    hits = support_words(ROOT)
    assert not hits, "support-desk words outside harness/domains/support*:\n" + "\n".join(hits)


def test_the_grep_finds_a_planted_word(tmp_path: Path) -> None:
    generic = tmp_path / "harness/sim/planted.py"
    generic.parent.mkdir(parents=True)
    generic.write_text(
        "order = 1  # a variable is code, not wording; sort order and ORDER BY are fine\n"
        'PROMPT = """Steps run in start order.\n'
        'Refund the Customer\'s order in a given order."""\n'
        "# the shipping address\n"
        'KEY = f"{order}_order"\n'
    )
    for exempt in ("harness/domains/support_extra.py", "harness/scaffold/project/desk.py"):
        (tmp_path / exempt).parent.mkdir(parents=True)
        (tmp_path / exempt).write_text('"""Customers, orders and refunds belong here."""\n')
    assert support_words(tmp_path) == [
        "harness/sim/planted.py:3: Refund",
        "harness/sim/planted.py:3: Customer",
        "harness/sim/planted.py:3: order",
        "harness/sim/planted.py:4: shipping",
    ]


# ------------------------------------------------------------------ a domain of one's own


class Library(Environment):
    """A lending library: a domain the harness knows nothing about."""

    domain = "library"
    description = "A public library where members borrow, renew and return books."
    policy = "A member may renew a book at most twice, and never once it is overdue."

    @tool
    def renew(self, book_id: str) -> dict:
        """Renew a borrowed book."""
        return {"book_id": book_id, "renewed": True}


LIBRARY = f"{__name__}:Library"
MEMBER = Persona.model_validate(
    {"name": "member", "description": "A retired teacher who reads a lot.", "model": "x/y"}
)
GOAL = Scenario(reason="You want to keep your book two more weeks.", known_info={"book": "B-7"})


def library_task(*checks: dict) -> Task:
    return Task.model_validate(
        {
            "kind": "task",
            "id": "renew",
            "title": "Renew a book",
            "level": 1,
            "domain": LIBRARY,
            "persona": MEMBER.model_dump(),
            "scenario": GOAL.model_dump(),
            "checks": list(checks) or [{"kind": "text", "contains": "renewed"}],
        }
    )


def episode(reply: str = "Renewed until June 3.") -> Transcript:
    return Transcript(
        task_id="renew",
        variant="v",
        variant_hash="h",
        trial=0,
        end_reason=EndReason.USER_STOP,
        messages=[
            Message(role="user", content="Can I keep my book longer?"),
            Message(role="assistant", content=reply),
        ],
    )


def assert_neutral(prompt: str) -> None:
    words = sorted({m.group().lower() for m in SUPPORT_WORDS.finditer(ORDERING.sub("", prompt))})
    assert words == [], f"support-desk words {words} in:\n{prompt}"


def test_the_simulated_user_is_told_the_domain_and_no_support_words() -> None:
    prompt = user_system_prompt(MEMBER, GOAL, ["###STOP###", "###TRANSFERRED###"], Library)
    assert Library.description in prompt
    assert "A retired teacher who reads a lot." in prompt and GOAL.reason in prompt
    assert Library.policy not in prompt  # the agent's rules are not the user's to know
    assert_neutral(prompt)
    generic = user_system_prompt(MEMBER, GOAL, ["###STOP###"])
    assert "setting" not in generic
    assert_neutral(generic)


def test_the_judges_are_told_the_domain_and_its_policy_and_no_support_words() -> None:
    prompts = {
        "criterion": criterion_prompt("The agent renews the book.", "", episode(), Library),
        "pairwise": pairwise_prompt(GOAL.reason, episode(), episode("No."), Library),
    }
    for name, prompt in prompts.items():
        system = prompt[0].content
        assert Library.description in system and Library.policy in system, name
        for message in prompt:
            assert_neutral(message.content)
    assert_neutral(criterion_prompt("The agent renews the book.", "", episode())[0].content)


class Recorder:
    """A judge model that records its prompts and prefers the first conversation."""

    def __init__(self) -> None:
        self.systems: list[str] = []

    async def complete(
        self, messages: list[Message], tools: list[ToolSpec], params: CompletionParams
    ) -> Completion:
        self.systems.append(messages[0].content)
        reply = '{"reasoning": "ok", "better": "1", "passed": true}'
        return Completion(message=Message(role="assistant", content=reply), model="recorder")


def test_grading_finds_the_domain_from_the_task(tmp_path: Path) -> None:
    judge = Recorder()
    verdict = asyncio.run(compare_pair(library_task(), episode(), episode("No."), judge))
    assert verdict.error is None and len(judge.systems) == 2
    assert all(Library.description in s and Library.policy in s for s in judge.systems)

    script = tmp_path / "judge.yaml"
    script.write_text(
        "kind: script\nrules:\n"
        "  - when: {system: 'public library'}\n"
        '    reply: \'{"reasoning": "Told the setting.", "passed": true}\'\n'
        '  - reply: \'{"reasoning": "Not told the setting.", "passed": false}\'\n'
    )
    check = {"kind": "llm_judge", "criterion": "The agent renews the book."}
    task = library_task(check)
    [spec] = task.checks
    assert isinstance(spec, CheckBase)
    context = CheckContext(task, ModelRuntime(), ModelRef(id="scripted", script=str(script)))
    result = asyncio.run(run_check(spec, episode(), context))
    assert (result.outcome, result.reason) == ("pass", "Told the setting.")
