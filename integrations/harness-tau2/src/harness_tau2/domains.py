"""tau2-bench's domains as harness domains, running tau2's own code.

Each episode's environment is a tau2 `Environment` (its toolkit over its pydantic database),
built from the harness state; a tool call is tau2's `make_tool_call`, so the agent sees what
tau2's agent sees: the same results, and a refusal as `Error: <message>`. After each call, the
harness state is the database's dump, so the final state (and `end_state` checks against the
gold actions replayed) is what tau2's `get_db_hash` compares. The database is validated once
per start state and each episode's is a copy-on-access view of it, whose changes are worked
out from the records the calls took (`harness_tau2.shared`).

The harness state is the database as JSON (`State` is tau2's database model); tasks start from
tau2's own `db.json` (`DATA`).
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel
from tau2.domains.airline.data_model import FlightDB
from tau2.domains.airline.environment import get_environment as airline_environment
from tau2.domains.airline.environment import get_tasks as airline_tasks
from tau2.domains.airline.tools import AirlineTools
from tau2.domains.airline.utils import AIRLINE_DB_PATH, AIRLINE_POLICY_PATH
from tau2.domains.retail.data_model import RetailDB
from tau2.domains.retail.environment import get_environment as retail_environment
from tau2.domains.retail.environment import get_tasks as retail_tasks
from tau2.domains.retail.tools import RetailTools
from tau2.domains.retail.utils import RETAIL_DB_PATH, RETAIL_POLICY_PATH
from tau2.environment.environment import Environment as Tau2Environment
from tau2.environment.toolkit import ToolKitBase

from harness.sdk import Environment, ToolError
from harness_tau2.shared import View, shared

DATA: dict[str, Path] = {"airline": Path(AIRLINE_DB_PATH), "retail": Path(RETAIL_DB_PATH)}
"""Each domain's start database, as tau2's package ships it."""


class Tau2Domain(Environment):
    """A tau2 domain: its tools, policy and database model. Subclasses are made by `domain`."""

    tau2_domain: ClassVar[str]
    toolkit: ClassVar[type[ToolKitBase]]
    """tau2's toolkit class of the domain (`toolkit(None).tool_type(name)`: read or write)."""
    _make: ClassVar[Callable[..., Tau2Environment]]

    def __init__(self, state: dict[str, Any]):
        super().__init__({})
        # The top level is this episode's own; a call replaces the tables it changed
        # (`View.settle`), so the state a suite shares is never changed and is not copied. The
        # database is a view over the start state's, validated once (harness_tau2.shared).
        self.state = dict(state)
        assert self.State is not None
        self._view = View(shared(self.State, state))
        self._tau2 = type(self)._make(db=self._view.database)

    def _use(self, name: str, arguments: dict[str, Any]) -> Any:
        """A tau2 tool call: its result as tau2 encodes it, a refusal as a `ToolError`. After the
        call, refused or not (a tool may change the database before it refuses, and tau2
        keeps what it changed), the state is the database."""
        refused: Exception | None = None
        with self._view.base.lock:  # shared records lent to this call are checked before another
            try:
                result = self._tau2.make_tool_call(name, requestor="assistant", **arguments)
                self._tau2.sync_tools()
            except Exception as exc:  # tau2's tools refuse by raising; tau2 shows `Error: <text>`
                refused = exc
            self._view.settle(self.state)
            if refused is not None:
                raise ToolError(str(refused))
            text = Tau2Environment.to_json_str(result)
        return text if isinstance(result, str) else json.loads(text)


def _forward(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """A harness tool that calls tau2's: the same name, parameters, types and docstring (its
    `Args:` become the parameters' descriptions)."""

    def call(self: Tau2Domain, **arguments: Any) -> Any:
        return self._use(name, arguments)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = method.__doc__
    call.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]
    call.__annotations__ = typing.get_type_hints(method, include_extras=True)
    call.__is_tool__ = True  # type: ignore[attr-defined]
    return call


def domain(
    name: str,
    make: Callable[..., Tau2Environment],
    toolkit: type[ToolKitBase],
    database: type[BaseModel],
    policy: Path,
) -> type[Tau2Domain]:
    """The harness domain `tau2-<name>` over tau2's environment constructor `make`."""
    tools = {
        tool: _forward(tool, method)
        for tool, method in toolkit(None)._func_tools.items()  # tau2's table of its tools
    }
    return typing.cast(
        "type[Tau2Domain]",
        type(
            f"Tau2{name.title()}",
            (Tau2Domain,),
            {
                "__module__": __name__,
                "domain": f"tau2-{name}",
                "tau2_domain": name,
                "description": f"tau2-bench's {name} customer service domain.",
                "policy": policy.read_text(),
                "State": database,
                "toolkit": toolkit,
                "_make": staticmethod(make),
                **tools,
            },
        ),
    )


Airline = domain("airline", airline_environment, AirlineTools, FlightDB, Path(AIRLINE_POLICY_PATH))
Retail = domain("retail", retail_environment, RetailTools, RetailDB, Path(RETAIL_POLICY_PATH))
DOMAINS: dict[str, type[Tau2Domain]] = {"airline": Airline, "retail": Retail}
TASKS: dict[str, Callable[[str | None], list[Any]]] = {
    "airline": airline_tasks,
    "retail": retail_tasks,
}
"""Each domain's task loader (a split name, or None for every task), as tau2 ships it."""
