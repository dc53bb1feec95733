"""The size rules as a check: modules <= 800 lines, function bodies <= 60.

Why a tool and not review: a module or function that grows past what a reader holds in mind
does so one small commit at a time, and no single review sees it cross the line. The rules:

- a module under `kafkapy/` has at most `MAX_MODULE_LINES` lines;
- a hand-written function (or method) body has at most `MAX_FUNCTION_LINES` lines, counted from
  its first statement after the docstring to its last line, so a docstring that explains why
  costs nothing;
- generated code (`kafkapy/protocol/messages/`, written by tools/gen_messages.py) is exempt.

Known exceptions live in an allow-list (`tools/size_exceptions.txt`), one `path[:function]` per
line followed by its current size. The list may only shrink: an entry whose module or function
is back within the limit (or gone) fails the check too, so it cannot outlive the fix and hide a
later regrowth. A listed function that grows past its recorded size fails as well.

Usage: `python tools/check_sizes.py [--root DIR] [--exceptions FILE]`; exit status 1 on any
violation, one line per violation on stdout.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "MAX_FUNCTION_LINES",
    "MAX_MODULE_LINES",
    "Size",
    "check",
    "function_sizes",
    "main",
    "measure",
    "read_exceptions",
]

MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 60
PACKAGE = "kafkapy"
GENERATED = ("kafkapy/protocol/messages/",)
DEFAULT_EXCEPTIONS = Path(__file__).with_name("size_exceptions.txt")


@dataclass(frozen=True)
class Size:
    """One measured module (`function` None) or function, keyed as in the allow-list."""

    path: str
    function: str | None
    lines: int

    @property
    def key(self) -> str:
        return self.path if self.function is None else f"{self.path}:{self.function}"

    @property
    def limit(self) -> int:
        return MAX_MODULE_LINES if self.function is None else MAX_FUNCTION_LINES


def _body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first statement after the docstring to the function's last line."""
    body = node.body
    if (
        len(body) > 1
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    end = node.end_lineno if node.end_lineno is not None else body[-1].lineno
    return end - body[0].lineno + 1


def function_sizes(source: str, path: str) -> Iterator[Size]:
    """Every function and method in `source`, named by its qualified name (`Class.method`,
    `outer.inner`), so two methods of the same name in different classes are told apart."""

    def walk(node: ast.AST, prefix: str) -> Iterator[Size]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                yield Size(path, name, _body_lines(child))
                yield from walk(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(ast.parse(source, filename=path), "")


def measure(root: Path) -> list[Size]:
    """Every hand-written module under `root/kafkapy` and every function in it."""
    sizes: list[Size] = []
    for file in sorted((root / PACKAGE).rglob("*.py")):
        path = file.relative_to(root).as_posix()
        if path.startswith(GENERATED):
            continue
        source = file.read_text(encoding="utf-8")
        sizes.append(Size(path, None, len(source.splitlines())))
        sizes.extend(function_sizes(source, path))
    return sizes


def read_exceptions(text: str) -> dict[str, int]:
    """`path[:function] size` lines; blank lines and `#` comments are skipped."""
    allowed: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            raise ValueError(f"size exceptions line {number}: want 'path[:function] lines': {raw!r}")
        allowed[parts[0]] = int(parts[1])
    return allowed


def check(sizes: list[Size], allowed: dict[str, int]) -> list[str]:
    """The violations: sizes over the limit and not allowed (or grown past their recorded
    size), and allow-list entries no longer over the limit."""
    problems: list[str] = []
    found: dict[str, Size] = {}
    for size in sizes:
        found[size.key] = size
        if size.lines <= size.limit:
            continue
        what = "module" if size.function is None else "function body"
        recorded = allowed.get(size.key)
        if recorded is None:
            problems.append(f"{size.key}: {what} has {size.lines} lines (limit {size.limit})")
        elif size.lines > recorded:
            problems.append(
                f"{size.key}: {what} grew to {size.lines} lines, past its allowed {recorded} "
                f"(limit {size.limit}); shrink it rather than raise the allowance"
            )
    for key in allowed:
        listed = found.get(key)
        if listed is None:
            problems.append(f"{key}: listed as a size exception but not found; remove the entry")
        elif listed.lines <= listed.limit:
            problems.append(
                f"{key}: listed as a size exception but now {listed.lines} lines, within the "
                f"limit {listed.limit}; remove the entry"
            )
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--exceptions", type=Path, default=DEFAULT_EXCEPTIONS)
    args = parser.parse_args(argv)
    allowed = read_exceptions(args.exceptions.read_text()) if args.exceptions.exists() else {}
    problems = check(measure(args.root), allowed)
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
