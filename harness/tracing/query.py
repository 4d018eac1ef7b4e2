"""The calls filter and the query language of weave's trace server, for the local store.

A filter (`op_names`, `trace_ids`, `trace_roots_only`, ...) becomes SQL conditions; a query
expression (`$and $or $not $eq $gt $gte $lt $lte $in $contains`, operands `$getField` with dotted
paths, `$literal`, `$convert`) is evaluated in Python on the rows the filter selected.
"""

from __future__ import annotations

import datetime
import json
import operator
from collections.abc import Iterable, Mapping
from typing import Any

from harness.tracing.local_db import op_short

# Filter keys that select on one column by membership.
_FILTER_COLUMNS = {
    "call_ids": "id",
    "trace_ids": "trace_id",
    "parent_ids": "parent_id",
    "thread_ids": "thread_id",
    "turn_ids": "turn_id",
    "wb_run_ids": "wb_run_id",
    "wb_user_ids": "wb_user_id",
}
_SORTABLE = {
    "id",
    "trace_id",
    "parent_id",
    "op_name",
    "display_name",
    "started_at",
    "ended_at",
    "exception",
}
_COMPARISONS = {"$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt, "$lte": operator.le}


def calls_where(project_id: str, filter: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """SQL conditions for a calls filter; listed calls must have started."""
    clauses = ["project_id = ?", "op_name IS NOT NULL"]
    params: list[Any] = [project_id]
    for key in ("input_refs", "output_refs"):
        if filter.get(key):
            raise ValueError(f"the local trace store does not filter calls by {key}")
    if (op_names := filter.get("op_names")) is not None:
        exact = [n for n in op_names if n.startswith("weave:") and not n.endswith(":*")]
        short = [op_short(n.removesuffix(":*")) for n in op_names if n not in exact]
        clauses.append(
            f"(op_name IN ({', '.join('?' * len(exact))})"
            f" OR op_short IN ({', '.join('?' * len(short))}))"
        )
        params += exact + short
    for key, column in _FILTER_COLUMNS.items():
        if (values := filter.get(key)) is not None:
            clauses.append(f"{column} IN ({', '.join('?' * len(values))})")
            params += values
    if filter.get("trace_roots_only"):
        clauses.append("parent_id IS NULL")
    return " AND ".join(clauses), params


def calls_order(sort_by: Iterable[Mapping[str, object]] | None) -> str:
    """SQL `ORDER BY` terms for a calls query (default: oldest first), ids breaking ties."""
    order = []
    for sort in sort_by or [{"field": "started_at", "direction": "asc"}]:
        if sort["field"] not in _SORTABLE:
            raise ValueError(f"cannot sort calls by {sort['field']!r}: not in {sorted(_SORTABLE)}")
        direction = "DESC" if sort["direction"] == "desc" else "ASC"
        order.append(f"{sort['field']} {direction}")
    return f"{', '.join(order)}, id"


def get_path(row: Mapping[str, Any], path: str) -> Any:
    """A dotted path into nested dicts (and list indices); None where it leads nowhere."""
    val: Any = row
    for part in path.split("."):
        if isinstance(val, Mapping):
            val = val.get(part)
        elif isinstance(val, list) and part.isdigit() and int(part) < len(val):
            val = val[int(part)]
        else:
            return None
    return val


def sort_key(value: Any) -> tuple[bool, Any]:
    """Missing values sort first, like SQL NULLs ascending."""
    return (value is not None, value)


def evaluate(expr: Mapping[str, Any], row: Mapping[str, Any]) -> Any:
    """A weave query expression (`{"$eq": [{"$getField": "x"}, {"$literal": 1}]}`) on a row."""
    (op, arg), *_ = expr.items()
    match op:
        case "$literal":
            return arg
        case "$getField":
            return get_path(row, arg)
        case "$convert":
            return convert(evaluate(arg["input"], row), arg["to"])
        case "$and":
            return all(evaluate(e, row) for e in arg)
        case "$or":
            return any(evaluate(e, row) for e in arg)
        case "$not":
            return not evaluate(arg[0], row)
        case "$eq":
            return evaluate(arg[0], row) == evaluate(arg[1], row)
        case "$in":
            return evaluate(arg[0], row) in [evaluate(e, row) for e in arg[1]]
        case "$contains":
            text = evaluate(arg["input"], row)
            sub = evaluate(arg["substr"], row)
            if not isinstance(text, str) or not isinstance(sub, str):
                return False
            if arg.get("case_insensitive"):
                return sub.lower() in text.lower()
            return sub in text
        case "$gt" | "$gte" | "$lt" | "$lte":
            left, right = evaluate(arg[0], row), evaluate(arg[1], row)
            if left is None or right is None:
                return False
            if isinstance(left, datetime.datetime) and isinstance(right, int | float):
                left = left.timestamp()  # weave compares times with epoch seconds
            return _COMPARISONS[op](left, right)
    raise ValueError(f"unsupported query operator {op!r}")


def convert(value: Any, to: str) -> Any:
    """`$convert`: a value as another type, or whether it exists."""
    if to == "exists":
        return value is not None
    if value is None:
        return None
    match to:
        case "double":
            return float(value)
        case "int":
            return int(value)
        case "string":
            return value if isinstance(value, str) else json.dumps(value)
        case "bool":
            return bool(value)
    raise ValueError(f"unsupported $convert target {to!r}")
