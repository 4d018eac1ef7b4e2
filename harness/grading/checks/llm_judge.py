"""`llm_judge`: a model in the judge role decides a criterion; its reasoning is the reason."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from harness.grading.checks import CheckContext, register_check
from harness.grading.judge import JudgeError, Judgement, ask, criterion_prompt, task_domain
from harness.grading.result import Finding
from harness.models import ModelError
from harness.specs.agent import ModelRef
from harness.specs.checks import CheckBase
from harness.transcript import Side, Transcript, Usage


class LLMJudgeCheck(CheckBase):
    """A model in the `judge` role decides whether the conversation meets a criterion."""

    kind: Literal["llm_judge"]
    passes_when: ClassVar[str] = (
        "a model in the `judge` role decides a `criterion` with a `rubric`, giving its reasoning:"
        " the check's `model`, else `--judge-model`, the grade node's or the climb's "
        "`judge_model`, else `judge_model:` in `harness.yaml`. There is no default: a run whose "
        "tasks need a judge and name none exits 2 before it plays, naming the tasks"
    )
    uses_judge: ClassVar[bool] = True
    criterion: str = Field(min_length=1, description="What must be true of the conversation.")
    rubric: str = Field(default="", description="How to decide: what passes, what fails.")
    model: ModelRef | None = Field(
        default=None,
        description="The judge model; by default the run's (`--judge-model`, the grade node's "
        "or the project file's `judge_model`; there is no built-in one).",
    )
    retries: int = Field(
        default=1, ge=0, le=5, description="Re-asks when the judgement cannot be parsed."
    )


@register_check(LLMJudgeCheck)
async def check_llm_judge(
    spec: LLMJudgeCheck, transcript: Transcript, context: CheckContext
) -> Finding:
    reference = spec.model or context.judge_model
    if reference is None:
        return Finding(
            "error",
            "no judge model: pass --judge-model, set judge_model in harness.yaml, or give the "
            "check a model",
            error_side=Side.JUDGE,
        )
    try:
        model = context.runtime.model(reference, role="judge")
    except Exception as exc:  # a judge that cannot start is the judge's error, not the checker's
        return Finding("error", f"judge: cannot start {reference.id}: {exc}", error_side=Side.JUDGE)
    spent = Usage()  # every reply the judge gave, the unparseable ones included
    try:
        domain = task_domain(context.task)
        prompt = criterion_prompt(spec.criterion, spec.rubric, transcript, domain)
        judgement = await ask(model, prompt, Judgement, spec.retries, transcript.trial, spent)
    except (JudgeError, ModelError) as exc:
        return Finding("error", f"judge: {exc}", error_side=Side.JUDGE, usage=_spent(spent))
    return Finding("pass" if judgement.passed else "fail", judgement.reasoning, usage=_spent(spent))


def _spent(usage: Usage) -> Usage | None:
    """The judge's usage; None when no call came back (nothing was spent)."""
    return None if usage == Usage() else usage
