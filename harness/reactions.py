"""What a user is told when an agent fails, and the words a user leaves with: read the same way by
the behaviour measures (`harness.production.behaviour`) and by the rule-based simulated user
(`harness.sim.user_behaviour`), so that a simulated user reacts exactly where the measures count
an error event, and the measures read its reactions as what they are. A core module, so that the
simulator and the trace readers share it without importing each other.
"""

from __future__ import annotations

import re

APOSTROPHE = "['\u2019]"  # typed or typographic: can't, can\u2019t
# An agent telling the user that something failed or cannot be done. No apology word: "sorry",
# "apologies" and "I'm sorry to hear that" are empathy, as often said before a question or a
# success as before a refusal; a refusal says what cannot be done.
AGENT_ERROR = re.compile(
    (
        r"\b(cannot|can'?t|can not|could(?:n'?t| not)|unable|not able|(?:was|were|am|is|are)"
        r"(?:n'?t| not) able|won'?t be able|not possible|impossible|not allowed|not permitted|"
        r"fail(?:ed|s|ure)?|errors?|went wrong|did(?:n'?t| not) (?:go through|work)|"
        r"(?:not|no longer) available|unavailable|not found|unfortunately|i'?m afraid|"
        r"i am afraid|denied|declined|rejected)\b"
    ).replace("'", APOSTROPHE),
    re.IGNORECASE,
)
# A user turn that leaves the conversation, not only the request: giving up, going elsewhere.
LEAVE = re.compile(
    (
        r"\b(forget (?:it|about it|this)|give up|i'?m done|i am done|(?:somewhere|someone) else|"
        r"elsewhere|another (?:company|shop|store|provider|bank|service))\b"
    ).replace("'", APOSTROPHE),
    re.IGNORECASE,
)


def reports_error(text: str) -> bool:
    """An agent reply that tells the user something failed or cannot be done (`AGENT_ERROR`);
    an apology or empathy alone does not."""
    return bool(AGENT_ERROR.search(text))
