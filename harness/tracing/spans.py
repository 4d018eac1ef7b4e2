"""Spans: the `Tracer` over a `WeaveClient`, and `child_span` nesting under the current span.

Spans are weave calls whose parents are passed explicitly, never taken from weave's call stack,
because episodes run concurrently in asyncio tasks.

Pydantic models in inputs and outputs (a `Transcript`, a `Message`) are recorded as
`model_dump(mode="json")`: `client.get_calls()` gives them back as `WeaveDict`s (dict subclasses)
of the model's fields, which `Model.model_validate` accepts. Left to weave 0.54, a model would cost
about 5 ms to serialize on Python 3.11 (it checks every attribute of the instance against a
runtime `Protocol`) and come back as a `WeaveObject` with extra `_class_name` / `_bases` keys.
weave's own objects (`weave.Object`, e.g. a `weave.Dataset`) are passed through, so they are
saved and referenced as weave does.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

from harness.secrets import memoized, redactor
from harness.tracing.plain import plain

if TYPE_CHECKING:
    from weave.trace.call import Call
    from weave.trace.weave_client import WeaveClient


class Span(Protocol):
    """A started span: a weave `Call` (a `LocalTracer`'s: a `LocalSpan`). Set `span.output`
    inside `Tracer.span` to record an output."""

    @property
    def id(self) -> str | None: ...

    @property
    def trace_id(self) -> str | None: ...

    output: Any


MAX_PENDING_WRITES = 500


class Tracer:
    """No-op when disabled (zero cost); otherwise records calls through a WeaveClient."""

    def __init__(self, client: WeaveClient | None) -> None:
        self.client = client
        self.enabled = client is not None
        self._weave_object: tuple[type, ...] = ()  # what `_plain` keeps as it is
        # A run's spans repeat the same texts (prompts, tool names and results, the history
        # each model call is given): each is masked once.
        self._redact = memoized(redactor(), size=4096)
        if client is not None:
            from weave.object.obj import Object
            from weave.trace.vals import Traceable

            self._weave_object = (Object, Traceable)

    def start(
        self,
        op: str,
        inputs: dict[str, Any],
        attributes: dict[str, Any] | None = None,
        parent: Span | None = None,
        display_name: str | None = None,
    ) -> Span | None:
        """Start a span under `parent` (a new trace when None); None when disabled."""
        if self.client is None:
            return None
        return self.client.create_call(
            op,
            self._plain(inputs),
            parent=cast("Call | None", parent),  # a span of this tracer: a weave Call
            attributes=attributes,
            display_name=display_name,
            use_stack=False,
        )

    def reference(self, trace_id: str | None, call_id: str | None) -> Span | None:
        """A stand-in for an earlier call (e.g. an episode recorded by another process), to
        nest new spans under it."""
        if self.client is None or trace_id is None or call_id is None:
            return None
        from weave.trace.call import Call

        return Call(
            _op_name="",
            trace_id=trace_id,
            project_id=self.client.project_id,
            parent_id=None,
            inputs={},
            id=call_id,
        )

    def end(
        self, span: Span | None, output: Any = None, exception: BaseException | None = None
    ) -> None:
        """End a span with its output, or with the exception that stopped it."""
        if self.client is None or span is None:
            return
        if exception is not None:
            exception = self._redacted(exception)
        span = cast("Call", span)  # a span this tracer started: a weave Call
        self.client.finish_call(span, self._plain(output), exception)
        # weave keeps every child of a live call (to sum their summaries at its end); a run's
        # root holds thousands of episodes, so a finished span lets go of what it recorded.
        span._children = []
        span.inputs, span.output = {}, None
        # weave writes from a thread pool behind an unbounded queue; when the writers fall
        # behind, wait for them, so that a long run's memory stays flat.
        if self.client.future_executor.num_outstanding_futures > MAX_PENDING_WRITES:
            self.client.flush()

    @contextmanager
    def span(
        self,
        op: str,
        inputs: dict[str, Any],
        attributes: dict[str, Any] | None = None,
        parent: Span | None = None,
        display_name: str | None = None,
    ) -> Iterator[Span | None]:
        """A span around a block: ends with `span.output` (None unless the block set it), or
        with the exception that propagates, which is then re-raised. Within the block it is the
        current span, so `child_span` calls nest under it."""
        span = self.start(op, inputs, attributes, parent, display_name)
        token = _CURRENT.set(_Current(self, span, attributes or {})) if span is not None else None
        try:
            yield span
        except BaseException as error:
            self.end(span, exception=error)
            raise
        finally:
            if token is not None:
                _CURRENT.reset(token)
        if span is not None:
            self.end(span, span.output)

    def _redacted(self, exception: BaseException) -> BaseException:
        """The exception as a trace records it (its type's name, its message, its stack), with
        the message redacted."""
        message = self._redact(str(exception))
        if message == str(exception):
            return exception
        stand_in = type(type(exception).__name__, (Exception,), {})(message)
        return stand_in.with_traceback(exception.__traceback__)

    def _plain(self, value: Any) -> Any:
        """`value` as JSON data (`harness.tracing.plain`), every string redacted (an API key
        never reaches a trace), pydantic models without their defaults (weave spends ~60 us on
        every leaf it records), and weave's own objects kept for weave to save as refs: a
        `weave.Object` such as a `Dataset`, and weave's containers (a `WeaveDict` row)."""
        return plain(value, text=self._redact, keep=self._weave_object, defaults=False)

    def flush(self) -> None:
        """Wait until every span started so far is written."""
        if self.client is not None:
            self.client.flush()

    def __enter__(self) -> Tracer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Flush, stop being weave's global client, and close the local store if any."""
        if self.client is None:
            return
        from weave.trace.context import weave_client_context

        from harness.tracing.local_server import LocalTraceServer

        self.client.flush()
        if weave_client_context.get_weave_client() is self.client:
            weave_client_context.set_weave_client_global(None)
        if isinstance(self.client.server, LocalTraceServer):
            self.client.server.close()
        self.client = None
        self.enabled = False


NO_TRACER = Tracer(None)


@dataclass(frozen=True)
class _Current:
    tracer: Tracer
    span: Span
    attributes: dict[str, Any]


# The span that new child spans nest under, per asyncio task (each episode runs in its own).
_CURRENT: ContextVar[_Current | None] = ContextVar("harness_current_span", default=None)


@dataclass
class SpanResult:
    """What a `child_span` block records: its output, and an error that did not raise (an
    episode that ended in error still has a transcript to keep)."""

    output: Any = None
    error: BaseException | None = None
    trace_id: str | None = None  # the span's ids, when tracing is on
    call_id: str | None = None

    @property
    def recording(self) -> bool:
        """Whether a span records this block (tracing is on): an output costly to build is
        built only then."""
        return self.call_id is not None


@contextmanager
def child_span(
    op: str, inputs: dict[str, Any], attributes: dict[str, Any] | None = None
) -> Iterator[SpanResult]:
    """A span nested under the current one, carrying its attributes plus `attributes`; a no-op
    costing one context lookup when no span is current (tracing off)."""
    current = _CURRENT.get()
    result = SpanResult()
    if current is None:
        yield result
        return
    merged = {**current.attributes, **(attributes or {})}
    span = current.tracer.start(op, inputs, merged, parent=current.span)
    if span is not None:
        result.trace_id, result.call_id = span.trace_id, span.id
    token = _CURRENT.set(_Current(current.tracer, span, merged)) if span is not None else None
    try:
        yield result
    except BaseException as error:
        current.tracer.end(span, result.output, exception=error)
        raise
    finally:
        if token is not None:
            _CURRENT.reset(token)
    current.tracer.end(span, result.output, exception=result.error)
