"""The redaction layer over a corpus of key, token, password and personal-data shapes
(`tests/secrets/redaction_corpus.py`), end to end through the commands that take text from production:

- `traces to-tasks` on an export in the trace server's call schema whose user says the value,
  whose tool is called with it, raises it and whose reply and feedback note repeat it: no key,
  token, password, card number, CVV or SSN is in any task file or printed line; the tasks
  validate (emails and phone numbers stay: they are the user's facts a task acts on);
- `personas from-traces`: no value of any shape in a persona file or printed line;
- `traces show` on sessions an app recorded with the real weave client (`record_locally`):
  nothing of any shape printed;
- `run-eval` with every shape in a task's first message, then `fidelity` against an export
  holding them: nothing secret in the results store's file, the HTML report, the printed and
  JSON fidelity report (which masks personal data too);
- store URLs: a PostgreSQL password with `#`, `?`, `/`, `@` or a space is masked whole in every
  message, and in `stored in` after a real run on a PostgreSQL server;
- an op name and an exception message with newlines and `key: value` text make task files the
  loader accepts, whose header comments are single lines.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.secrets import mask_url_passwords, redact, redact_pii
from harness.secrets.personal import is_card
from harness.store_location import StoreLocation
from harness.testing.fake_server import FakeServer
from tests.conftest import ROOT, newest_run, run_cli, scripted_eval
from tests.production.test_behaviour_profiles import session_calls
from tests.production.test_trace_task_signals import Raise, Turn, session
from tests.secrets.redaction_corpus import ALL_VALUES, CARD, CORPUS, KEEP, PII

SECRET_KINDS = [name for name in CORPUS if name not in PII]
SECRET_VALUES = tuple(v for name in SECRET_KINDS for v in CORPUS[name][1])


def files_text(folder: Path) -> str:
    return "".join(p.read_bytes().decode("latin-1") for p in folder.rglob("*") if p.is_file())


def leaked(text: str, values: tuple[str, ...]) -> list[str]:
    return [value for value in values if value in text]


# ----------------------------------------------------------------- the layer itself


@pytest.mark.parametrize("name", list(CORPUS))
def test_every_shape_is_masked_with_a_placeholder_that_says_what(name: str) -> None:
    text, values = CORPUS[name]
    masked = redact_pii(text)
    assert leaked(masked, values) == [], masked
    assert "[REDACTED" in masked or "[PII:" in masked
    if name in PII:  # contact details: masked for people and models, kept in tasks
        assert redact(text) == text
    else:
        assert leaked(redact(text), values) == []


@pytest.mark.parametrize(
    ("text", "secret", "placeholder"),
    [
        ("token glpat-" + "a1B2c3D4e5F6g7H8i9J0", "glpat-a1B2", "[REDACTED:gitlab-token]"),
        ("ANTHROPIC sk-ant-" + "api03-abcDEF123456", "api03-abc", "[REDACTED:anthropic-key]"),
        ("Authorization: Bearer " + "abc.DEF-123_456", "DEF-123", "[REDACTED]"),
        ("https://h.example/cb?token=" + "Zx81QpLm77&x=1", "Zx81Qp", "token=[REDACTED]&x=1"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "MIIEow", ""),
        ('{"password": "' + 'c0rrect horse"}', " horse", '"password": "[REDACTED:password]"}'),
        ("my password is " + "Sunny#2026 ok", "Sunny#2026", "[REDACTED:password] ok"),
        ("SG." + "a" * 22 + "." + "b" * 43, "aaaaaaaaaa", "[REDACTED:sendgrid-key]"),
    ],
)
def test_more_shapes(text: str, secret: str, placeholder: str) -> None:
    masked = redact(text)
    assert secret not in masked and placeholder in masked, masked


def test_text_without_secrets_is_left_as_it_is() -> None:
    for text in KEEP:
        assert redact_pii(text) == text


def test_card_numbers_are_luhn_checked() -> None:
    assert redact("card 4111 1111 1111 1111") == "card [PII:card]"
    assert redact("card 4111-1111-1111-1111 737") == "card [PII:card] [PII:cvv]"
    assert redact("ref 4111 1111 1111 1112") == "ref 4111 1111 1111 1112"  # Luhn fails
    assert redact("order 1234567812345678") == "order 1234567812345678"  # no network prefix
    assert redact("ssn 000-12-3456, 123-45-6789") == "ssn 000-12-3456, [PII:ssn]"


def test_a_card_number_stands_alone_and_a_hex_digest_is_none() -> None:
    # sha256("338"): 13 of its digits pass for a card number (a network's prefix, Luhn)
    digest = "5d8f6cce532a7aeb57196be62344095936793400b3aeb3580d248b17d5518a86"
    assert is_card("6234409593679") and "6234409593679" in digest
    stored = json.dumps({"$state": digest, "task": "5ce4631674059041"})
    assert redact(stored) == stored
    assert redact(f"card: 4111111111111111. ({CARD})") == "card: [PII:card]. ([PII:card])"


@pytest.mark.parametrize("inside", ["#", "?", "/", "@", " ", "#?/@ x"])
def test_a_url_password_is_masked_whole_whatever_it_holds(inside: str) -> None:
    url = f"postgresql://u2:pw{inside}SECRET9@127.0.0.1/evals2"
    for shown in (mask_url_passwords(url), str(StoreLocation.parse(url)), repr(StoreLocation(url))):
        assert "SECRET9" not in shown and "pw" not in shown.split("u2:", 1)[1], shown
        assert "postgresql://u2:[REDACTED]@127.0.0.1/evals2" in shown
    message = f"stored in {url} (run r-1); write to ops@example.com"
    assert "SECRET9" not in redact(message)


# ----------------------------------------------------------------- traces to-tasks


def failing_session(thread: str, text: str) -> list[dict]:
    """A session whose user says `text`, whose tool gets it, raises it, and whose reply and
    thumbs-down note repeat it."""
    return session(
        thread,
        Turn(
            f"Please check this: {text}",
            [("lookup_warranty", {"ref": text}, Raise(f"LookupError: nothing for {text}"))],
            f"Sorry, I found nothing for {text}.",
            ("👎", f"The bot failed on {text}"),
        ),
        Turn(f"Again: {text}", [], f"Still nothing for {text}."),
    )


def to_tasks(cli, tmp_path: Path, *sessions: list[dict]) -> tuple[Path, str]:
    source = tmp_path / "calls.jsonl"
    source.write_text("".join(json.dumps(c) + "\n" for s in sessions for c in s))
    out = tmp_path / "tasks"
    done = cli("traces", "to-tasks", "--source", source, "--out", out)
    assert done.exit_code == 0, done.stderr
    checked = cli("validate", out)
    assert checked.exit_code == 0, checked.stdout + checked.stderr
    return out, done.stdout + done.stderr


@pytest.mark.parametrize("name", list(CORPUS))
def test_to_tasks_copies_no_secret_into_a_task(cli, tmp_path: Path, name: str) -> None:
    text, values = CORPUS[name]
    out, printed = to_tasks(cli, tmp_path, failing_session(f"t-{name}", text))
    [path] = out.glob("*.yaml")
    written = path.read_text()
    task = yaml.safe_load(written)
    if name in PII:  # the user's contact details are the task's facts
        assert values[0] in task["start"]["first_message"]
    else:
        assert leaked(written + printed, values) == [], name
        masked = task["start"]["first_message"]
        assert "[REDACTED" in masked or "[PII:" in masked
        # the same placeholder wherever the value was: the replay matches the masked argument
        [recording] = task["start"]["state"]["recordings"]
        assert recording["arguments"]["ref"] in masked
        assert recording["arguments"]["ref"] in task["title"] + task["scenario"]["reason"]


def test_no_secret_of_any_shape_in_tasks_from_one_export(cli, tmp_path: Path) -> None:
    sessions = [failing_session(f"t-{name}", text) for name, (text, _) in CORPUS.items()]
    out, printed = to_tasks(cli, tmp_path, *sessions)
    assert leaked(files_text(out) + printed, SECRET_VALUES) == []


def test_newlines_in_an_op_or_an_exception_start_no_yaml_key(cli, tmp_path: Path) -> None:
    hostile_op = "lookup_warranty\nkind: persona\nchecks: []"
    hostile_error = Raise("KeyError: boom\nid: forged\ntitle: forged\r\nlevel: 9\u2028x: 1")
    out, printed = to_tasks(
        cli,
        tmp_path,
        session(
            "nl-1",
            Turn("Where is SN-4410?", [(hostile_op, {"ref": "SN-4410"}, hostile_error)], "Oops."),
        ),
        session(
            "nl-2",
            Turn("Is SN-5510 covered?", [("lookup_warranty", {"ref": "SN-5510"}, hostile_error)]),
        ),
    )
    paths = sorted(out.glob("*.yaml"))
    assert paths, printed
    for path in paths:
        text = path.read_text()
        task = yaml.safe_load(text)
        assert task["kind"] == "task" and task["id"] == path.stem and task["level"] != 9
        assert "\n" not in task["title"] and task["id"] != "forged"
        header = text.split("\nkind: task\n", 1)[0].splitlines()
        assert header and all(line.startswith("# ") for line in header), header
        top_level = [line.split(":", 1)[0] for line in text.splitlines() if line[:1].isalpha()]
        assert "x" not in top_level and top_level.count("id") == 1 and top_level.count("kind") == 1


def test_a_header_comment_is_one_line_whatever_it_quotes() -> None:
    from harness.production.convert import comment

    for text in ("a\nkind: x", "a\r\nid: y", "a\x85b: 1", "a\u2028c: 1\u2029d: 2", "a\x0be: 1"):
        line = comment(text)
        assert line.startswith("# ") and line.count("\n") == 1 and line.endswith("\n")
        assert len(yaml.safe_load(line + "k: v\n")) == 1


# ----------------------------------------------------------------- personas from-traces


@pytest.mark.parametrize("name", list(CORPUS))
def test_mined_personas_copy_no_secret_and_no_personal_data(tmp_path: Path, name: str) -> None:
    text, values = CORPUS[name]
    calls = [
        call
        for n in range(8)
        for call in session_calls(
            f"p{n}", [(text, "Could you tell me more?"), ("that is all", "Done, anything else?")]
        )
    ]
    source = tmp_path / "calls.jsonl"
    source.write_text("".join(json.dumps(c) + "\n" for c in calls))
    out = tmp_path / "personas"
    done = run_cli("personas", "from-traces", "--source", source, "--out", out)
    assert done.returncode == 0, done.stderr
    written = files_text(out)
    assert leaked(written + done.stdout + done.stderr, values) == [], name
    examples = [
        e
        for p in out.glob("*.yaml")
        for e in yaml.safe_load(p.read_text())["behaviour"]["examples"]
    ]
    assert any("[REDACTED" in e or "[PII:" in e for e in examples), examples
    assert run_cli("validate", out).returncode == 0


# ----------------------------------------------------------------- traces show

APP = """
import sys
from pathlib import Path

import openai
import weave

from harness.tracing import record_locally

tracer = record_locally(Path(sys.argv[1]))
client = openai.OpenAI(base_url=sys.argv[2] + "/v1", api_key="sk-test-0123456789abcdef")
texts = {texts!r}


@weave.op
def lookup_account(ref: str) -> dict:
    raise LookupError(f"no account for {{ref}}")


@weave.op
def handle_message(session_id: str, text: str) -> str:
    try:
        lookup_account(text)
    except LookupError:
        pass
    reply = client.chat.completions.create(
        model="gpt-4.1-mini", messages=[{{"role": "user", "content": text}}]
    )
    return reply.choices[0].message.content


for name, text in texts.items():
    with weave.thread("s-" + name):
        handle_message("s-" + name, text)
        handle_message("s-" + name, "and again: " + text)
tracer.close()
"""


async def echoing_model(messages):
    from harness.transcript import Message

    return Message(role="assistant", content=f"You said: {messages[-1].content}")


def test_traces_show_prints_no_secret_and_no_personal_data(tmp_path: Path) -> None:
    store = tmp_path / "traces.db"
    app = tmp_path / "app.py"
    app.write_text(APP.format(texts={name: text for name, (text, _) in CORPUS.items()}))
    with FakeServer(responder=echoing_model).running() as model:
        served = subprocess.run(
            [sys.executable, str(app), str(store), model.url],
            capture_output=True,
            text=True,
            timeout=180,
            cwd=ROOT,
        )
    assert served.returncode == 0, served.stderr
    for name, (_, values) in CORPUS.items():
        shown = run_cli("traces", "show", f"s-{name}", "--trace-store", store, COLUMNS="300")
        assert shown.returncode == 0, shown.stderr
        assert "You said" in shown.stdout
        assert leaked(shown.stdout + shown.stderr, values) == [], (name, shown.stdout)
        assert "[REDACTED" in shown.stdout or "[PII:" in shown.stdout


# ----------------------------------------------------------------- the store and fidelity


def test_the_store_and_the_fidelity_report_keep_no_secret(tmp_path: Path) -> None:
    store = tmp_path / "r.db"
    said = " ".join(text for text, _ in CORPUS.values())
    scripted_eval(
        store,
        "agents/support-baseline.yaml",
        "--ids",
        "order-status",
        "--set",
        f"task.start.first_message={json.dumps('Where is order O-1001? ' + said)}",
    )
    calls = [
        call
        for n, (text, _) in enumerate(CORPUS.values())
        for call in session_calls(f"f{n}", [(text, "Which order?"), ("O-1001", "Shipped.")])
    ]
    export = tmp_path / "calls.jsonl"
    export.write_text("".join(json.dumps(c) + "\n" for c in calls))
    html = tmp_path / "report.html"
    run = newest_run(store)
    common = ("fidelity", run, "--against", export, "--store", store, "--bootstrap", "100")
    as_json = run_cli(*common, "--json", "--html", html)
    assert as_json.returncode == 0, as_json.stderr
    printed = run_cli(*common, COLUMNS="200")
    assert printed.returncode == 0, printed.stderr
    everything = files_text(tmp_path) + as_json.stdout + as_json.stderr + printed.stdout
    assert leaked(everything.replace(export.read_text(), ""), SECRET_VALUES) == []
    assert leaked(as_json.stdout + printed.stdout + printed.stderr, ALL_VALUES) == []
    assert "[REDACTED:github-token]" in files_text(tmp_path)  # the stored first message


@pytest.mark.parametrize("inside", ["#", "?", "/", "@", " "])
def test_a_store_url_password_is_never_printed(inside: str) -> None:
    pytest.importorskip("psycopg")
    url = f"postgresql://u2:pw{inside}SECRET9@127.0.0.1:0/evals2"
    done = run_cli("runs", "list", "--store", url)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "SECRET9" not in done.stdout + done.stderr


@pytest.fixture(scope="module")
def postgres():
    from tests.helpers.postgres import serving

    yield from serving()


def test_stored_in_masks_a_password_with_a_hash(postgres, tmp_path: Path) -> None:
    url = postgres.database().replace("postgresql://harness@", "postgresql://harness:pw#SECRET9@")
    done = scripted_eval(tmp_path / "unused.db", "agents/support-baseline.yaml", "--store", url)
    assert "SECRET9" not in done.stdout + done.stderr
    assert "stored in postgresql://harness:[REDACTED]@/" in done.stdout
