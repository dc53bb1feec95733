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

__all__ = ["AcyclicModulesContract", "AcyclicPackagesContract"]

_SHOWN_IMPORTS = 12


def import_circles(graph: grimp.ImportGraph, containers: list[str]) -> list[list[str]]:
    """The strongly connected components of more than one module among the modules under
    `containers`."""
    modules = sorted(
        m for m in graph.modules if any(m == c or m.startswith(c + ".") for c in containers)
    )
    inside = set(modules)
    return strongly_connected({m: sorted(graph.find_modules_directly_imported_by(m) & inside)
                               for m in modules})


def package_of(module: str, packages: set[str], folded: tuple[str, ...] = ()) -> str:
    """The package whose own modules `module` is one of: itself for a package's `__init__`; a
    module of a `folded` package (or below it) counts as its parent's."""
    for fold in folded:
        if module == fold or module.startswith(fold + "."):
            return fold.rpartition(".")[0]
    return module if module in packages else module.rpartition(".")[0]


def _below(graph: grimp.ImportGraph, containers: list[str]) -> list[str]:
    """The modules strictly below the containers (the containers' own modules - the
    distribution's `__init__` and `__main__` - are entry points, not a package of the design)."""
    return sorted(m for m in graph.modules
                  if any(m.startswith(c + ".") for c in containers)
                  and m.rpartition(".")[0] not in containers)


def package_edges(graph: grimp.ImportGraph, containers: list[str],
                  folded: tuple[str, ...] = ()) -> dict[str, set[str]]:
    """Package -> the packages its own modules import (each package is the modules directly in
    it: `kafkapy.broker`'s flat files are one node, `kafkapy.broker.handlers` another)."""
    modules = _below(graph, containers)
    packages = {m.rpartition(".")[0] for m in modules} & set(modules)
    edges: dict[str, set[str]] = {package_of(m, packages, folded): set() for m in modules}
    inside = set(modules)
    for m in modules:
        own = package_of(m, packages, folded)
        for imported in graph.find_modules_directly_imported_by(m) & inside:
            other = package_of(imported, packages, folded)
            if other != own:
                edges[own].add(other)
    return edges


def strongly_connected(edges: dict[str, list[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm,
    iterative: no recursion limit on a deep graph)."""
    modules = sorted(edges)
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


class AcyclicPackagesContract(Contract):
    """No package under `containers` imports a package that imports it back, directly or through
    others - a package being the modules directly in it, so a parent and its subpackage count as
    two (`kafkapy.broker`'s flat files and `kafkapy.broker.handlers`). Why beside
    `acyclic_modules`: two packages can loop without any module circle (`cluster.node` ->
    `security.inter_node` -> `cluster.peer`), and then neither package can be read, moved or
    layered apart - what a package is for."""

    type_name = "acyclic_packages"

    containers = fields.ListField(subfield=fields.StringField())
    #: packages that are part of their parent's surface (generated code over the parent's
    #: schema), counted as their parent
    folded = fields.ListField(subfield=fields.StringField(), required=False, default=[])
    #: loops still being cut, each its packages joined by " | " (sorted): reported, not failed;
    #: a loop that changes (grows, shrinks or goes) breaks the contract until this list says so
    still_looping = fields.ListField(subfield=fields.StringField(), required=False, default=[])

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        containers = [str(c) for c in self.containers]  # type: ignore[attr-defined]
        folded = tuple(str(f) for f in self.folded)  # type: ignore[attr-defined]
        known = {str(k) for k in self.still_looping}  # type: ignore[attr-defined]
        edges = package_edges(graph, containers, folded)
        found_loops = strongly_connected({p: sorted(e) for p, e in edges.items()})
        circles = [c for c in found_loops if " | ".join(c) not in known]
        gone = sorted(known - {" | ".join(c) for c in found_loops})
        imports: list[list[tuple[str, str, int]]] = []
        modules = _below(graph, containers)
        inside = set(modules)
        packages = {m.rpartition(".")[0] for m in modules} & inside
        for circle in circles:
            members = set(circle)
            found = []
            for importer in modules:
                own = package_of(importer, packages, folded)
                if own not in members:
                    continue
                for imported in sorted(graph.find_modules_directly_imported_by(importer) & inside):
                    other = package_of(imported, packages, folded)
                    if other != own and other in members:
                        details = graph.get_import_details(importer=importer, imported=imported)
                        line = details[0]["line_number"] if details else 0
                        found.append((importer, imported, line))
            imports.append(found)
        return ContractCheck(
            kept=not circles and not gone,
            metadata={"circles": circles, "imports": imports, "gone": gone},
            warnings=[f"package loop still being cut: {k}" for k in sorted(known) if k not in gone],
        )

    def render_broken_contract(self, check: ContractCheck) -> None:
        metadata: dict[str, Any] = check.metadata
        for loop in metadata["gone"]:
            output.print_error(f"No longer a loop (update still_looping): {loop}")
        for circle, found in zip(metadata["circles"], metadata["imports"], strict=True):
            output.print_error(f"Package loop of {len(circle)} packages: {', '.join(circle)}")
            for importer, imported, line in found[:_SHOWN_IMPORTS]:
                output.print_error(f"-   {importer} -> {imported} (l.{line})")
            if len(found) > _SHOWN_IMPORTS:
                output.print_error(f"    (and {len(found) - _SHOWN_IMPORTS} more imports)")
            output.new_line()
