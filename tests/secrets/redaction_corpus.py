"""Key, token, password and personal-data shapes the redaction layer must mask, each as a user
would paste it into a chat (`CORPUS`: name -> (text, the values that must not survive)), and
text it must leave alone (`KEEP`)."""

from __future__ import annotations

# Built from parts, so that no scanner takes this file for a leak.
OPENAI = "sk-proj-" + "Xy7Qw2Lm9Np4Rs8Tv1Uz3Ab6Cd0Ef5Gh" + "T3BlbkFJ" + "k2Jm8Pq4Ws6Er1Ty9Ui3Op7"
GITHUB = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
GITHUB_PAT = (
    "github_pat_"
    + "11ABCDEFG0"
    + "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ01234567"
)
AWS_ID = "AKIA" + "J4QXH7LMB2PZ9RWT"
AWS_SECRET = "wJalrXUtnFEMI" + "/K7MDENG/bPxRfiCYzQ8Lp3Vd2Nk"
SLACK = "xoxb-" + "263594206564-2343594206574-" + "FGqddMF8t08v8N7Oq4i57vs1"
GOOGLE = "AIza" + "SyD4r8Qw2Lm9Np4Rs8Tv1Uz3Ab6Cd0Ef5G"
STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkphbmUgRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
HUGGINGFACE = "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567"
PASSWORD = "Tr0ub4dor&3x"
CARD = "4111 1111 1111 1111"
CVV = "737"
EMAIL = "jane.roe@mailbox.example"
SSN = "078-05-1120"
PHONE = "+1 (415) 555-0173"

CORPUS: dict[str, tuple[str, tuple[str, ...]]] = {
    "openai": (f"my key is {OPENAI}, why is it refused?", (OPENAI, OPENAI[8:30])),
    "github": (f"the CI token {GITHUB} stopped working", (GITHUB,)),
    "github_pat": (f"Fine-grained token: {GITHUB_PAT}", (GITHUB_PAT, GITHUB_PAT[11:40])),
    "aws_access_key_id": (f"aws_access_key_id={AWS_ID}", (AWS_ID,)),
    "aws_secret_key": (f"and the AWS secret is {AWS_SECRET} if you need it", (AWS_SECRET,)),
    "slack": (f"Slack bot token {SLACK} posts nothing", (SLACK, SLACK[5:])),
    "google": (f"maps key={GOOGLE}", (GOOGLE,)),
    "stripe": (f"charge with {STRIPE} please", (STRIPE,)),
    "jwt": (f"Authorization header was {JWT} today", (JWT, JWT.split(".")[2])),
    "huggingface": (f"download with {HUGGINGFACE}", (HUGGINGFACE,)),
    "password": (f"login jane, password: {PASSWORD}", (PASSWORD,)),
    "card": (
        f"Pay with card {CARD}, CVV {CVV}, exp 09/28",
        (CARD, CARD.replace(" ", ""), f"CVV {CVV}"),
    ),
    "email": (f"write to {EMAIL} about it", (EMAIL,)),
    "ssn": (f"my SSN is {SSN} for the form", (SSN,)),
    "phone": (f"call me back at {PHONE} tonight", (PHONE, "555-0173")),
}
"""Every shape, with the values that must be gone once masked."""

PII = ("email", "phone")
"""The shapes only `redact_pii` masks: a task keeps them (the facts a user gave)."""

KEEP = (
    "Where is order O-1002? It was $1,234.56 on 2026-11-30 at 10:45.",
    "ticket SN-4410, serial 1234567890, commit 3f786850e387550fdab836ed7e6dc881de23001b",
    "the password is expired, and the token: none was sent",
    "see https://example.com/a/b?q=1 and http://localhost:8080/v1",
)
"""Text that must come out of `redact_pii` as it went in."""

ALL_VALUES = tuple(value for _, values in CORPUS.values() for value in values)
