"""import-linter contract types of our own (pyproject.toml's `[tool.importlinter] contract_types`).

`acyclic_modules`: no import circle among the modules under `containers`, module by module,
TYPE_CHECKING imports included (import-linter's graph has them). Why not the built-in
`acyclic_siblings`: it folds each subpackage into one node, so under `kafkapy.server` it reports
package-level loops (the cluster parts reach the SASL phase, which reaches the broker, which
builds the cluster node) that hold no module circle, and cannot be kept while saying nothing of
the module circles that matter: two modules each naming the other (the broker and the runtimes
it builds, the connection and its authenticator) cannot be read, tested or replaced apart.
Cutting one is a Protocol of what the importer uses, or an explicit constructor dependency.

lint-imports runs with the working directory on `sys.path`, so `make lint` finds this module.
"""

from __future__ import annotations

from typing import Any

import grimp
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck

__all__ = ["AcyclicModulesContract"]

_SHOWN_IMPORTS = 12


def import_circles(graph: grimp.ImportGraph, containers: list[str]) -> list[list[str]]:
    """The strongly connected components of more than one module among the modules under
    `containers` (Tarjan's algorithm, iterative: no recursion limit on a deep graph)."""
    modules = sorted(
        m for m in graph.modules if any(m == c or m.startswith(c + ".") for c in containers)
    )
    inside = set(modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) & inside) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for root in modules:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(edges[node]):
                work.append((node, i + 1))
                nxt = edges[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if work:  # back in the caller: pass the low link up
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return sorted(circles)


class AcyclicModulesContract(Contract):
    """No module under `containers` takes part in an import circle (module docstring)."""

    type_name = "acyclic_modules"

    containers = fields.ListField(subfield=fields.StringField())

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        containers = [str(c) for c in self.containers]  # type: ignore[attr-defined]
        circles = import_circles(graph, containers)
        imports: list[list[tuple[str, str, int]]] = []
        for circle in circles:
            members = set(circle)
            found = []
            for importer in circle:
                for imported in sorted(graph.find_modules_directly_imported_by(importer) & members):
                    details = graph.get_import_details(importer=importer, imported=imported)
                    line = details[0]["line_number"] if details else 0
                    found.append((importer, imported, line))
            imports.append(found)
        return ContractCheck(kept=not circles, metadata={"circles": circles, "imports": imports})

    def render_broken_contract(self, check: ContractCheck) -> None:
        metadata: dict[str, Any] = check.metadata
        for circle, found in zip(metadata["circles"], metadata["imports"], strict=True):
            output.print_error(f"Import circle of {len(circle)} modules: {', '.join(circle)}")
            for importer, imported, line in found[:_SHOWN_IMPORTS]:
                output.print_error(f"-   {importer} -> {imported} (l.{line})")
            if len(found) > _SHOWN_IMPORTS:
                output.print_error(f"    (and {len(found) - _SHOWN_IMPORTS} more imports)")
            output.new_line()
