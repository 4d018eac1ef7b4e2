"""The YAML loader holds up against hostile and large input: an alias bomb is one line, a 5 MB
task validates, the corpus keeps its lines, all within kernel-enforced CPU limits and a memory
ceiling; its data is PyYAML's; each file is parsed once per command."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from harness.specs.located import SpecError, read_yaml
from tests.conftest import JUDGE, ROOT, SCRIPTED

# Runs the command in this process and reports its peak memory: limits, not timings. VmHWM
# belongs to the process's own address space (ru_maxrss would count the forked test runner's).
MEASURED = """
import re, sys
from pathlib import Path
from harness.cli import main
sys.argv = ["harness", *sys.argv[1:]]
try:
    main()
finally:
    peak = re.search(r"VmHWM:\\s+(\\d+)", Path("/proc/self/status").read_text())[1]
    print(f"peak-kb {peak}", file=sys.stderr)
"""


# A 5 MB task takes about 4 s of CPU here; the limit is for runaway (superlinear) parsing, with
# room for a slower CI machine, not a timing.
CPU_5MB_S = 20


def within_limits(*args: str | Path, cpu_s: int, memory_mb: int) -> list[str]:
    """Run `harness ARGS` with at most `cpu_s` seconds of CPU (the kernel stops it past that)
    and check its peak memory; its stdout and stderr lines, the measurement line taken out."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))

    done = subprocess.run(
        [sys.executable, "-c", MEASURED, *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        preexec_fn=limit,
        timeout=120,
    )
    assert done.returncode >= 0, f"stopped by signal {-done.returncode}: past {cpu_s}s of CPU"
    lines = done.stdout.splitlines() + done.stderr.splitlines()
    [peak] = [line for line in lines if line.startswith("peak-kb ")]
    assert int(peak.split()[1]) < memory_mb * 1024, f"{peak} (limit {memory_mb} MB)"
    assert "Traceback" not in done.stderr
    return [line for line in lines if line != peak]


def big_task(folder: Path, size: int, broken: bool = False) -> Path:
    """A valid support-desk task of about `size` bytes (an inline start state of many orders);
    `broken`: its last order has a status the domain does not know."""
    head = (ROOT / "tasks/support/order-status.yaml").read_text().split("start:")[0]
    lines = [
        head.replace("id: order-status", "id: big-task"),
        "start:",
        "  first_message: Hi, where is my order O-1002?",
        "  state:",
        "    today: '2026-11-20'",
        "    customers:",
        "      C-100: {name: Ada, email: ada@example.com, address: {street: 1 A St, city: London,"
        " zip: N1, country: GB}}",
        "    orders:",
    ]
    order, total = 0, sum(len(line) + 1 for line in lines)
    while total < size:
        lines += [
            f"      O-{order:07d}:",
            "        customer_id: C-100",
            "        items:",
            "          - {sku: HP-200, name: Wireless headphones, price: 59.0, qty: 1}",
            "        status: delivered",
            "        placed_at: '2026-11-05'",
            f"        tracking: 1Z999AA1012345{order:04d}",
            "        shipping_address: {street: 12 Analytical Street, city: London, zip: N1 9GU,"
            " country: GB}",
        ]
        total += sum(len(line) + 1 for line in lines[-8:])
        order += 1
    if broken:
        lines[-4] = "        status: lost"
    lines += ["end:", "  max_turns: 6", "checks:", "  - kind: text", "    contains: hello"]
    path = folder / "tasks" / "big.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def big_folder(tmp_path: Path) -> Path:
    (tmp_path / "personas").symlink_to(ROOT / "personas")
    return tmp_path


def test_an_alias_bomb_is_one_line_at_once() -> None:
    lines = within_limits("validate", "tests/bad_inputs/alias-bomb.yaml", cpu_s=2, memory_mb=150)
    assert lines == [
        "tests/bad_inputs/alias-bomb.yaml:9:11: aliases expand to more than 200000 values; "
        "write the data out instead",
        "0 valid, 1 invalid",
    ]


def test_a_5_mb_task_file_validates(big_folder: Path) -> None:
    path = big_task(big_folder, 5_000_000)
    assert path.stat().st_size >= 5_000_000
    lines = within_limits("validate", path, cpu_s=CPU_5MB_S, memory_mb=300)
    assert lines == [f"ok  task     {path}", "1 valid, 0 invalid"]


def test_a_5_mb_task_file_with_an_error_at_its_end_gives_its_line(big_folder: Path) -> None:
    path = big_task(big_folder, 5_000_000, broken=True)
    lines = within_limits("validate", path, cpu_s=CPU_5MB_S, memory_mb=300)
    [problem, summary] = lines
    line = len(path.read_text().splitlines()) - 8  # the last order's status
    assert problem.startswith(f"{path}:{line}:9: start.state.orders.O-")
    assert problem.endswith(
        ".status: Input should be 'processing', 'shipped', 'delivered', "
        "'cancelled' or 'refunded', found 'lost'"
    )
    assert summary == "0 valid, 1 invalid"


def test_the_corpus_gives_its_lines_within_limits() -> None:
    lines = within_limits("validate", "tests/bad_inputs", cpu_s=20, memory_mb=300)
    assert lines[-1].endswith(" invalid")
    assert sum(line.startswith("tests/bad_inputs/") for line in lines) >= 40


def bundled_yaml() -> list[Path]:
    folders = ("tasks", "personas", "agents", "dags", "ci", "tests/bad_inputs", "examples")
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.y*ml"))


@pytest.mark.parametrize("path", bundled_yaml(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_data_is_pyyamls(path: Path) -> None:
    try:
        expected = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError):
        with pytest.raises(SpecError):
            read_yaml(path)
        return
    try:
        data, _ = read_yaml(path)
    except SpecError as exc:  # a duplicate key PyYAML lets through, or the bomb
        assert "duplicate key" in str(exc) or "aliases expand" in str(exc)
        return
    assert data == expected


@pytest.mark.parametrize(
    ("text", "data"),
    [
        ("a: 1\nb: [1, 2.5, true, null, ~, 2024-01-02, 0x1F, 1_000, yes, 'x', 1:30]\n", None),
        (
            "base: &b {x: 1, y: 2}\nc:\n  <<: *b\n  x: 3\n",
            {"base": {"x": 1, "y": 2}, "c": {"x": 3, "y": 2}},
        ),
        ("m: {<<: [{a: 1}, {a: 2, b: 3}]}", None),
        ("l: &l [1, 2]\nm: [*l, *l]\n", None),
        ("a: !!str 12\nb: !!int '12'\nc: !!binary aGVsbG8=\n", None),
        ("'=': 1\n? q\n: 2\n", None),
    ],
)
def test_scalars_merges_and_aliases_read_as_pyyaml_reads_them(
    tmp_path: Path, text: str, data: object
) -> None:
    path = tmp_path / "f.yaml"
    path.write_text(text)
    got, _ = read_yaml(path)
    assert got == yaml.safe_load(text)
    if data is not None:
        assert got == data


def test_an_alias_is_a_copy_not_a_shared_value(tmp_path: Path) -> None:
    path = tmp_path / "f.yaml"
    path.write_text("a: &x {k: [1]}\nb: *x\n")
    data, _ = read_yaml(path)
    data["b"]["k"].append(2)
    assert data["a"] == {"k": [1]}


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("a:\n  b: 1\n  c: [x, {d: 1, d: 2}]\n", "f.yaml:3:17: a.c[1].d: duplicate key 'd'"),
        ("a: &r [1, *r]\n", "f.yaml:1:11: invalid YAML: recursive alias '*r'"),
        ("a: *nowhere\n", "f.yaml:1:4: invalid YAML: found undefined alias 'nowhere'"),
        (
            "a: !python/object x\n",
            "f.yaml:1:4: invalid YAML: could not determine a constructor "
            "for the tag '!python/object'",
        ),
        ("x: " + "[" * 300 + "]" * 300 + "\n", "f.yaml:1:203: nested deeper than 200 levels"),
        (
            "a: \x07\n",
            "f.yaml:1:4: invalid YAML: unacceptable character #x0007: special "
            "characters are not allowed",
        ),
    ],
)
def test_problems_are_one_located_line(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "f.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as caught:
        read_yaml(path)
    [problem] = caught.value.problems
    assert str(problem).replace(f"{path.parent}/", "") == error


def test_positions_are_found_when_asked_for(tmp_path: Path) -> None:
    path = tmp_path / "f.yaml"
    path.write_text(
        "kind: task\nchecks:\n  - kind: text\n    contains: [a, b]\nbase: &b {x: 1}\nc: *b\n"
    )
    _, positions = read_yaml(path)
    where = {keys: (place.line, place.col) for keys, place in positions.items()}
    assert where[("checks",)] == (2, 1)
    assert where[("checks", 0)] == (3, 5)
    assert where[("checks", 0, "contains", 1)] == (4, 19)
    assert where[("base", "x")] == (5, 11)
    assert where[("c",)] == (6, 1)  # an alias: its own place, not the anchor's insides


def test_a_run_parses_each_file_once(cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Planning, preflight, kind sniffing and loading all read the files; each is parsed once."""
    import harness.specs.located as located

    parsed: Counter[str] = Counter()
    parse = located.parse_yaml

    def counted(text: str, path: Path) -> object:
        parsed[located.display(path)] += 1
        return parse(text, path)

    monkeypatch.setattr(located, "parse_yaml", counted)
    result = cli(
        "run-eval",
        "--tasks",
        "tasks/support",
        "--agent",
        "agents/support-baseline.yaml",
        "--set",
        SCRIPTED,
        "--judge-model",
        JUDGE,
        "--store",
        tmp_path / "r.db",
        "--no-traces",
        "--no-cache",
    )
    assert result.exit_code == 0, result.stderr
    assert len([s for s in parsed if s.startswith("tasks/support/")]) == 22
    assert set(parsed.values()) == {1}, json.dumps(parsed.most_common(3))
