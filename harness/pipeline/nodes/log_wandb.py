"""`log_wandb`: log the pipeline to a W&B run: the resolved configuration (with the variants'
hashes), summary metrics per run, a per-task table, comparisons and gate decisions.

Offline by default (a run directory under `dir`, synced later with `wandb sync`); online when
`mode: online` or `WANDB_MODE=online` and the user is logged in. wandb never starts weave here
(`WANDB_DISABLE_WEAVE=true`): the harness traces with its own client.

The run is written by a detached child the command does not wait for (issue 42: waiting cost
every run-eval about two seconds); `flush_pending` writes the runs of children that died.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import shutil
import string
import subprocess
import sys
import time
from collections.abc import Container
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.pipeline.nodes import NodeContext, NodeKind, register
from harness.pipeline.types import Comparison, GateDecision, Graded, WandbRun
from harness.report.summary import run_figures
from harness.secrets import redact
from harness.specs.wandb import WandbTarget


class LogWandbParams(WandbTarget):
    """Where the W&B run goes."""


def metrics(store: Any, inputs: list[Any]) -> tuple[dict[str, Any], list[list[Any]]]:
    """Summary metrics (prefixed by variant) and per-task table rows."""
    summary: dict[str, Any] = {}
    rows: list[list[Any]] = []
    for item in inputs:
        if isinstance(item, Graded):
            figures = run_figures(store, item.run_id, item.levels)
            prefix = item.variant
            summary.update(
                {
                    f"{prefix}/pass_rate": figures.rate,
                    f"{prefix}/pass_rate_low": figures.low,
                    f"{prefix}/pass_rate_high": figures.high,
                    f"{prefix}/passed": figures.passed,
                    f"{prefix}/graded": figures.graded,
                    f"{prefix}/episodes": figures.episodes,
                    f"{prefix}/errors": figures.errors,
                    f"{prefix}/too_many_errors": int(figures.too_many_errors),
                    f"{prefix}/cost_usd": figures.cost_usd,  # agent, user and judge together
                    f"{prefix}/agent_cost_usd": figures.usage.cost_usd,
                    f"{prefix}/user_cost_usd": figures.user_usage.cost_usd,
                    f"{prefix}/judge_cost_usd": figures.judge_usage.cost_usd,
                    f"{prefix}/variant_hash": item.variant_hash,
                }
            )
            rows += [
                [
                    item.variant,
                    item.run_id,
                    line.task_id,
                    line.level,
                    line.passed,
                    line.trials,
                    ", ".join(line.failed_checks),
                ]
                for line in figures.tasks
            ]
        elif isinstance(item, Comparison):
            summary.update(
                {
                    "compare/difference": item.result.tasks.difference,
                    "compare/difference_low": item.result.tasks.low,
                    "compare/difference_high": item.result.tasks.high,
                    "compare/p_value": item.result.tasks.p_value,
                    "compare/mcnemar_p": item.result.mcnemar.p_value,
                }
            )
        elif isinstance(item, GateDecision):
            gate = item.result
            summary.update(
                {
                    "gate/passed": int(gate.passed),
                    "gate/status": gate.status,
                    "gate/reasons": len(gate.reasons),
                    "gate/undecided": len(gate.undecided),
                }
            )
    return summary, rows


def start_wandb_run(
    target: WandbTarget,
    name: str,
    job_type: str,
    config: dict[str, Any],
    run_id: str | None = None,
    resume: str | None = None,
) -> Any:
    """A W&B run in the target's mode (offline unless told otherwise); wandb never starts weave
    and reports no errors of its own."""
    os.environ.setdefault("WANDB_DISABLE_WEAVE", "true")
    os.environ.setdefault("WANDB_ERROR_REPORTING", "false")
    import wandb

    mode = target.resolved_mode()
    os.makedirs(target.dir, exist_ok=True)
    return wandb.init(
        project=target.project,
        entity=target.entity,
        mode=mode,  # type: ignore[arg-type]  # $WANDB_MODE's text as is: wandb checks it
        dir=target.dir,
        name=name,
        id=run_id,
        resume=resume,  # type: ignore[arg-type]  # "allow" or None
        job_type=job_type,
        config=config,
        settings=wandb.Settings(
            console="off", silent=True, x_disable_stats=True, x_disable_machine_info=True
        ),
    )


def finished(run: Any) -> WandbRun:
    """Finish a W&B run; where it went."""
    run.finish()
    directory = None if run.disabled else os.path.dirname(run.dir)
    mode = "disabled" if run.disabled else run.settings.mode
    return WandbRun(
        run_id=run.id, mode="offline" if mode == "dryrun" else mode, directory=directory
    )


PENDING = "wandb-pending-*.json"  # payloads whose W&B run is not written yet, in the target's dir


async def run(params: LogWandbParams, inputs: list[Any], ctx: NodeContext) -> WandbRun:
    """The metrics are read from the store here; the W&B run is written by a detached child
    (importing wandb and starting its service take about two seconds), which the command does
    not wait for: it returns while the run is written.

    Nothing is lost if either process ends: the payload (secrets redacted) is on disk before the
    child starts and removed only after its run is finished; the child holds an exclusive lock
    on it (taken here, before the child exists, so no other writer can claim it meanwhile), and a
    payload whose lock is free has lost its writer: the next `log_wandb` node writing to the
    same folder, or `flush_pending`, writes it, under the same run id."""
    mode = params.resolved_mode()
    if mode == "disabled":
        return WandbRun(run_id="", mode=mode, directory=None)
    summary, rows = metrics(ctx.store, inputs)
    run_id = "".join(random.choices(string.ascii_lowercase + string.digits, k=8))
    os.makedirs(params.dir, exist_ok=True)
    payload = {
        "target": params.model_copy(update={"mode": mode}).model_dump(mode="json"),
        "run_id": run_id,
        "name": ctx.pipeline_id,
        "config": ctx.config,
        "summary": summary,
        "rows": rows,
    }
    path, lock = _pending_payload(params.dir, run_id, redact(json.dumps(payload, default=str)))
    try:
        _start_writer(path, lock)
    finally:
        os.close(lock)  # the child's copy keeps the lock for as long as it writes
    return WandbRun(run_id=run_id, mode=mode, directory=os.path.join(params.dir, "wandb"))


def _pending_payload(folder: str, run_id: str, text: str) -> tuple[Path, int]:
    """The payload written under a name `flush_pending` ignores, locked, then renamed to its
    pending name: a writer never sees it incomplete or unlocked while this process lives."""
    path = Path(folder, PENDING.replace("*", run_id))
    part = path.with_suffix(".part")
    lock = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(lock, "w", encoding="utf-8", closefd=False) as out:
            out.write(text)
        os.replace(part, path)
    except BaseException:
        os.close(lock)
        part.unlink(missing_ok=True)
        raise
    return path, lock


def _start_writer(path: Path, lock: int) -> None:
    """A child writing the payload's run, detached: its own session (a Ctrl-C to the
    terminal's process group does not stop it), its output to a log next to the payloads (none
    of it reaches the terminal after the command returned), nobody waiting for it."""
    code = f"import sys; from {__name__} import write_pending; write_pending(*sys.argv[1:])"
    with open(path.parent / "wandb-writer.log", "ab") as log:
        child = subprocess.Popen(
            [sys.executable, "-c", code, str(path), str(lock)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            pass_fds=(lock,),
            start_new_session=True,
        )
    # Not waited for; those that ended are reaped as later ones start (no zombies in a process
    # running many pipelines, such as a notebook).
    _WRITERS[:] = [writer for writer in _WRITERS if writer.poll() is None] + [child]


_WRITERS: list[subprocess.Popen[bytes]] = []


def write_pending(payload_file: str, lock: str) -> None:
    """In the child: the run of the payload the node wrote (its lock inherited), then any other
    payload of the same folder whose writer died."""
    os.set_inheritable(int(lock), False)  # wandb's service must not hold the lock after us
    # Importing wandb and starting its service take two seconds of CPU, while the command that
    # started us is finishing (its summary, its stores): on a busy machine, it goes first.
    os.nice(10)
    try:
        _write_run(Path(payload_file))
    finally:
        os.close(int(lock))
    for run_id, why in flush_pending(Path(payload_file).parent).failed.items():
        print(f"W&B run {run_id} not written: {why}", file=sys.stderr)  # to the writer's log


def pending(folder: str | Path) -> list[Path]:
    """The payloads in `folder` (a `log_wandb` target's `dir`) whose W&B run is not written
    yet: being written by a writer, or left by one that died."""
    return sorted(Path(folder).glob(PENDING))


@dataclass
class WandbRuns:
    """The pending W&B runs of a `log_wandb` folder that a flush (`harness wandb-flush`) saw."""

    folder: Path
    written: list[str] = field(default_factory=list)  # run ids written: their writer had died
    # run id -> why its run could not be written (its data unreadable, W&B refusing it); it
    # stays pending, and the other runs are written all the same
    failed: dict[str, str] = field(default_factory=dict)
    pending: list[str] = field(default_factory=list)  # run ids still being written at the end


def finish_pending(folder: str | Path, timeout_s: float = 120) -> WandbRuns:
    """Every W&B run pending in `folder` written: the command returns before its run is, so
    before `wandb sync` of the folder or before reading the run, finish them. Runs whose writer
    died are written here (`flush_pending`, also for a writer that dies while this waits);
    runs being written are waited for, up to `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    done = WandbRuns(Path(folder))
    while True:
        flushed = flush_pending(folder, skip=done.failed)
        done.written += flushed.written
        done.failed.update(flushed.failed)
        done.pending = [run for run in map(_run_id, pending(folder)) if run not in done.failed]
        if not done.pending or time.monotonic() >= deadline:
            return done
        time.sleep(0.05)


def _run_id(payload: Path) -> str:
    """The run id in a payload's name (`PENDING`)."""
    prefix, suffix = PENDING.split("*")
    return payload.name.removeprefix(prefix).removesuffix(suffix)


def flush_pending(folder: str | Path, skip: Container[str] = ()) -> WandbRuns:
    """Write the W&B runs of the payloads in `folder` (a `log_wandb` target's `dir`, by default
    `.harness`) whose writer died (killed before it finished), each once: payloads another
    writer is writing are left to it, and so are the run ids in `skip`."""
    found = WandbRuns(Path(folder))
    for path in pending(folder):
        run_id = _run_id(path)
        lock = None if run_id in skip else _claim(path)
        if lock is None:
            continue
        try:
            found.written.append(_write_run(path))
        except Exception as exc:  # this payload's own problem: the others are still written
            found.failed[run_id] = redact(f"{type(exc).__name__}: {exc}")
        finally:
            os.close(lock)
    return found


def _claim(path: Path) -> int | None:
    """The payload's lock, when no writer holds it and the payload is still pending."""
    try:
        lock = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.path.samestat(os.fstat(lock), os.stat(path)):
            return lock
    except (BlockingIOError, FileNotFoundError):  # its writer is alive, or has just finished
        pass
    os.close(lock)
    return None


def _write_run(path: Path) -> str:
    """The W&B run of a payload whose lock is held; what an earlier writer of it left (it died
    before removing the payload) is removed first, so a payload makes one run; the payload is
    removed once the run is finished."""
    import wandb

    payload = json.loads(path.read_text(encoding="utf-8"))
    target = WandbTarget.model_validate(payload["target"])
    run_id = payload["run_id"]
    for left in Path(target.dir, "wandb").glob(f"*run-*-{run_id}"):
        shutil.rmtree(left)
    resume = "allow" if target.resolved_mode() == "online" else None  # the same run online
    run = start_wandb_run(target, payload["name"], "eval", payload["config"], run_id, resume)
    try:
        run.log(payload["summary"])
        run.summary.update(payload["summary"])
        if payload["rows"]:
            columns: list[str | int] = [
                "variant",
                "run",
                "task",
                "level",
                "passed",
                "trials",
                "failed checks",
            ]
            run.log({"tasks": wandb.Table(columns=columns, data=payload["rows"])})
    except BaseException:
        run.finish(exit_code=1)  # the payload stays: written again, whole, by the next flush
        raise
    run.finish()
    path.unlink()
    return str(run_id)


register(
    NodeKind(
        "log_wandb",
        LogWandbParams,
        ((Graded, Comparison, GateDecision),),
        WandbRun,
        run,
        variadic=True,
    )
)
