"""Where a python agent's own code runs, and how its crash is shown.

The user's agent code never runs on the harness's event loop: code that blocks (a `time.sleep`,
an endless loop, the sync `tools.call` inside `async def respond`) would otherwise stop the loop
that enforces the episode's time limit, plays the other episodes and answers Ctrl-C.

- An `async def` agent runs on ONE agent event loop, in a daemon thread started the first time
  it is needed: one loop for the whole process, so that a client the agent's module creates at
  import (an `AsyncOpenAI` client, a connection pool) keeps working from one call to the next.
  The harness awaits it through `asyncio.wrap_future`, so that a time limit fires and cancels it.
- A sync agent runs in a daemon thread of its own per call; not in the loop's default executor,
  whose threads `asyncio.run` joins at shutdown (a stuck agent would hold up Ctrl-C and the end
  of the run). A thread still stuck when its episode is over is abandoned; being a daemon, it
  does not keep the process alive.

`user_frames` picks, out of a crash's traceback, the frames of the user's code (not the
harness's, not the standard library's) that the failure reason names.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from harness.imports import frame_text
from harness.imports import user_frames as code_frames

_lock = threading.Lock()
_agent_loop: asyncio.AbstractEventLoop | None = None
_agent_pid = 0  # the process that started it
FRAMES_KEPT = 3


def agent_loop() -> asyncio.AbstractEventLoop:
    """The event loop async agent code runs on, started once (a daemon thread) per process."""
    global _agent_loop, _agent_pid  # pylint: disable=global-statement  # one loop per process
    with _lock:
        # a forked child inherits the loop but not its thread: it starts its own
        if _agent_loop is None or _agent_loop.is_closed() or _agent_pid != os.getpid():
            _agent_pid = os.getpid()
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="harness-agent-loop")
            thread.daemon = True  # code stuck on it never keeps the process alive
            thread.start()
            _agent_loop = loop
        return _agent_loop


def replace_blocked_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Give up on an agent loop that agent code blocks (its thread is abandoned), so that the
    next episodes get a fresh one rather than all waiting out their time limit behind it."""
    global _agent_loop  # pylint: disable=global-statement
    with _lock:
        if _agent_loop is loop:
            _agent_loop = None


async def loop_answers(loop: asyncio.AbstractEventLoop, within_s: float = 0.5) -> bool:
    """Whether an event loop still runs its callbacks (False: code on it blocks)."""
    answered = concurrent.futures.Future[None]()
    try:
        loop.call_soon_threadsafe(answered.set_result, None)
        await asyncio.wait_for(asyncio.wrap_future(answered), within_s)
    except (TimeoutError, RuntimeError):  # RuntimeError: the loop is closed
        return False
    return True


async def run_async_agent(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Await agent code run on the agent loop; cancelling this cancels it there."""
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, agent_loop()))


async def run_sync_agent(function: Callable[..., Any], *args: Any) -> Any:
    """Call sync agent code in a daemon thread of its own and await its result (with this
    task's context, so that the spans of the tools it calls nest where they belong)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if done.done():  # cancelled meanwhile: the episode is over
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)

    def call() -> None:
        result, error = None, None
        try:
            result = function(*args)
        except Exception as exc:  # pylint: disable=broad-exception-caught  # handed over
            error = exc
        except BaseException as exc:  # sys.exit() in agent code: its crash, not the run's end
            error = RuntimeError(f"{type(exc).__name__}({exc})").with_traceback(exc.__traceback__)
        with contextlib.suppress(RuntimeError):  # the harness's loop closed: nobody waits
            loop.call_soon_threadsafe(settle, result, error)

    context = contextvars.copy_context()
    threading.Thread(target=context.run, args=(call,), name="harness-agent", daemon=True).start()
    return await done


def user_frames(exc: BaseException) -> list[str]:
    """The last frames of the user's code in an exception's traceback, innermost first, as
    `agent.py:21 in respond`; at most `FRAMES_KEPT`."""
    return [frame_text(frame) for frame in reversed(code_frames(exc))][:FRAMES_KEPT]
