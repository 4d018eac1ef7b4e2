"""The behavioural dimensions the sim-to-real report compares, grouped in families, and the
direction of each that makes the agent's job easier (easy mode)."""

from __future__ import annotations

FAMILIES: dict[str, tuple[str, ...]] = {
    "information": ("disclosure_first", "ambiguous_start"),
    "clarification": ("asks_back", "question_rate"),
    "error reaction": ("pushback", "rephrase", "pivot", "accept", "abandon"),
    "patience": ("user_turns", "abandoned"),
    "style": (
        "words_per_turn",
        "exclamation_rate",
        "capitals",
        "emoji_rate",
        "typos",
        "formality",
        "ascii_letters",
    ),
}
DIMENSIONS = tuple(name for names in FAMILIES.values() for name in names)
FAMILY_OF = {name: family for family, names in FAMILIES.items() for name in names}
# +1: a higher value makes the agent's job easier; -1: a lower one
EASIER = {
    "disclosure_first": 1,
    "ambiguous_start": -1,
    "asks_back": -1,
    "pushback": -1,
    "rephrase": -1,
    "abandon": -1,
    "abandoned": -1,
    "pivot": 1,
    "accept": 1,
}
EASY_WORDS = {
    "disclosure_first": "front-load more of the facts",
    "ambiguous_start": "open without the needed facts less often",
    "asks_back": "ask back less",
    "pushback": "push back less after an agent error",
    "rephrase": "rephrase less after an agent error",
    "abandon": "abandon less after an agent error",
    "abandoned": "abandon fewer sessions",
    "pivot": "quietly pivot more after an agent error",
    "accept": "accept an agent error more",
}
