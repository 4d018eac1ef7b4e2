"""Your agent: `harness` calls `respond(conversation, tools)` once per user turn.

`conversation` is the visible conversation as role/content dicts; `tools.call(name, **args)`
runs a tool of the domain and returns its JSON result, or raises `ToolError` on a refusal. Return
the reply as a string. Plug in your real agent here (an LLM client, a framework) the same way.
"""

from __future__ import annotations

import re
from typing import Any

from harness.sdk import ToolError

MEMBER = re.compile(r"\bM-\d+\b")
TITLE = re.compile(r"\"([^\"]+)\"")


def respond(conversation: list[dict[str, str]], tools: Any) -> str:
    """Production: find the book the member names and lend it."""
    said = " ".join(m["content"] for m in conversation if m["role"] == "user")
    title, member = TITLE.search(said), MEMBER.search(said)
    if title is None:
        return 'Which book would you like? Please give its title in quotes, like "Dune".'
    if member is None:
        return "What is your library card number (M-...)?"
    found = tools.call("search_books", query=title.group(1))
    if not found:
        return f"Sorry, we have no book called {title.group(1)}. Anything else?"
    book = found[0]
    try:
        loan = tools.call("borrow_book", book_id=book["book_id"], member_id=member.group(0))
    except ToolError as refusal:
        return f"Sorry, I could not lend {book['title']}: {refusal}. Anything else?"
    return f"Done: {book['title']} is yours for {loan['due_in_days']} days. Anything else?"


def respond_v2(conversation: list[dict[str, str]], tools: Any) -> str:
    """A candidate: checks availability first and says when the book is on loan."""
    said = " ".join(m["content"] for m in conversation if m["role"] == "user")
    title = TITLE.search(said)
    if title is not None and MEMBER.search(said) is not None:
        found = tools.call("search_books", query=title.group(1))
        if found and not found[0]["available"]:
            return f"Sorry, {found[0]['title']} is on loan right now. Anything else?"
    return respond(conversation, tools)
