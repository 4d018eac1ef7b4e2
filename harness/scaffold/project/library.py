"""A small lending library: the domain your agent works in. Replace it with your own.

A domain is an `Environment` subclass: its `state` is a JSON-like dict (validated against
`State` at the start of every episode), and each `@tool` method is a tool the agent may call
(type hints become the JSON-schema parameters, the docstring the description). A `ToolError`
is a refusal the agent sees as the tool's result.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from harness.sdk import Environment, ToolError, register_domain, tool


class Book(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str
    author: str
    available: bool = True


class Loan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    book_id: str
    member_id: str


class LibraryState(BaseModel):
    """What a task's start state may hold; state checks are validated against it too."""

    model_config = ConfigDict(extra="forbid")

    books: dict[str, Book]
    members: list[str]
    loans: list[Loan] = []


@register_domain
class Library(Environment):
    """Members borrow books; a book that is on loan cannot be lent again."""

    domain = "library"
    description = "A lending library's front desk: members ask for books to borrow."
    policy = "Lend a book only to a known member, and only when it is available."
    State = LibraryState

    @tool
    def search_books(self, query: str) -> list[dict[str, Any]]:
        """Books whose title or author contains the query, with their ids and availability."""
        query = query.lower()
        return [
            {"book_id": book_id, **book}
            for book_id, book in self.state["books"].items()
            if query in book["title"].lower() or query in book["author"].lower()
        ]

    @tool
    def borrow_book(self, book_id: str, member_id: str) -> dict[str, Any]:
        """Lend a book to a member for 21 days."""
        book = self.state["books"].get(book_id)
        if book is None:
            raise ToolError(f"no book {book_id}")
        if member_id not in self.state["members"]:
            raise ToolError(f"no member {member_id}")
        if not book["available"]:
            raise ToolError(f"{book_id} is on loan")
        book["available"] = False
        self.state["loans"].append({"book_id": book_id, "member_id": member_id})
        return {"book_id": book_id, "member_id": member_id, "due_in_days": 21}
