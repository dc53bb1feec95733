"""tools/check_sizes.py: the size rules `make test` enforces, and its allow-list that only shrinks."""

from __future__ import annotations

from pathlib import Path

from tools.check_sizes import (
    MAX_FUNCTION_LINES,
    MAX_MODULE_LINES,
    check,
    function_sizes,
    main,
    measure,
    read_exceptions,
)

ROOT = Path(__file__).resolve().parents[2]


def _function(name: str, body_lines: int, docstring_lines: int = 0) -> str:
    doc = ['    """Why.'] + ["    more why"] * max(docstring_lines - 2, 0) + ['    """'] if docstring_lines else []
    body = [f"    x{i} = {i}" for i in range(body_lines - 1)] + ["    return None"]
    return "\n".join([f"def {name}() -> None:", *doc, *body]) + "\n"


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def _run(tmp_path: Path, files: dict[str, str], exceptions: str = "") -> tuple[int, list[str]]:
    root = _tree(tmp_path, files)
    allow = tmp_path / "exceptions.txt"
    allow.write_text(exceptions)
    problems = check(measure(root), read_exceptions(exceptions))
    assert main(["--root", str(root), "--exceptions", str(allow)]) == (1 if problems else 0)
    return (1 if problems else 0), problems


def test_module_over_the_limit_fails(tmp_path: Path) -> None:
    over = "x = 1\n" * (MAX_MODULE_LINES + 1)
    at = "x = 1\n" * MAX_MODULE_LINES
    rc, problems = _run(tmp_path, {"kafkapy/big.py": over, "kafkapy/ok.py": at})
    assert rc == 1
    assert problems == [f"kafkapy/big.py: module has {MAX_MODULE_LINES + 1} lines (limit 800)"]


def test_function_body_over_the_limit_fails(tmp_path: Path) -> None:
    source = _function("long", MAX_FUNCTION_LINES + 1) + _function("fits", MAX_FUNCTION_LINES)
    rc, problems = _run(tmp_path, {"kafkapy/m.py": source})
    assert rc == 1
    assert problems == ["kafkapy/m.py:long: function body has 61 lines (limit 60)"]


def test_methods_and_nested_functions_are_named_by_qualified_name() -> None:
    source = "class Log:\n" + "".join(
        "    " + line + "\n" for line in _function("append", 3).splitlines()
    )
    sizes = {s.function: s.lines for s in function_sizes(source, "m.py")}
    assert sizes == {"Log.append": 3}


def test_the_docstring_does_not_count(tmp_path: Path) -> None:
    source = _function("explained", MAX_FUNCTION_LINES, docstring_lines=30)
    assert [s.lines for s in function_sizes(source, "m.py")] == [MAX_FUNCTION_LINES]
    assert _run(tmp_path, {"kafkapy/m.py": source}) == (0, [])


def test_a_function_that_is_only_a_docstring_is_one_line() -> None:
    source = 'def f() -> None:\n    """Only why."""\n'
    assert [s.lines for s in function_sizes(source, "m.py")] == [1]


def test_generated_messages_are_exempt(tmp_path: Path) -> None:
    files = {
        "kafkapy/protocol/messages/produce.py": "x = 1\n" * (MAX_MODULE_LINES + 1)
        + _function("encode", MAX_FUNCTION_LINES + 5)
    }
    assert _run(tmp_path, files) == (0, [])


def test_a_listed_exception_passes_until_it_grows(tmp_path: Path) -> None:
    files = {"kafkapy/m.py": _function("long", 70)}
    assert _run(tmp_path, files, "kafkapy/m.py:long 70\n") == (0, [])
    rc, problems = _run(tmp_path, {"kafkapy/m.py": _function("long", 71)}, "kafkapy/m.py:long 70\n")
    assert rc == 1
    assert "grew to 71 lines" in problems[0]


def test_a_stale_exception_fails(tmp_path: Path) -> None:
    files = {"kafkapy/m.py": _function("long", MAX_FUNCTION_LINES), "kafkapy/small.py": "x = 1\n"}
    rc, problems = _run(
        tmp_path, files, "# fixed since\nkafkapy/m.py:long 70\nkafkapy/small.py 900\nkafkapy/gone.py 900\n"
    )
    assert rc == 1
    assert problems == [
        "kafkapy/m.py:long: listed as a size exception but now 60 lines, within the limit 60; remove the entry",
        "kafkapy/small.py: listed as a size exception but now 1 lines, within the limit 800; remove the entry",
        "kafkapy/gone.py: listed as a size exception but not found; remove the entry",
    ]


def test_the_project_keeps_its_size_rules() -> None:
    assert main(["--root", str(ROOT)]) == 0
