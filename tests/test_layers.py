"""Imports run one way, along the data flow (ARCHITECTURE.md): a module imports only from its own
layer or the layers below, and no two modules import each other, directly or around a loop,
not even through imports under ``if TYPE_CHECKING:`` (annotations only: they may reach a
lower layer's module that imports nothing back, never close a loop).

The layers are checked on what modules import when they run; the loops on everything.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import eoslab

LAYERS: tuple[frozenset[str], ...] = (
    frozenset(
        {
            "settings",
            "clock",
            "background",
            "message",
            "kafka_api",
            "kio_entities",
            "fault_events",
            "clients",
        }
    ),
    frozenset({"rundir", "control", "admin", "console"}),
    frozenset({"run_context"}),
    frozenset({"refbroker", "proxy"}),
    frozenset({"runtime"}),
    frozenset({"workload", "probe"}),
    frozenset({"nemesis"}),
    frozenset({"scenarios"}),
    frozenset({"verify"}),
    frozenset({"report"}),
    frozenset({"orchestration"}),
    frozenset({"bench", "cli", "soak"}),
)
"""Lowest first: the contract and helpers; the lab's own services (they are started as
processes, never imported, by the runtime); the runtime; workload and probe; the nemesis; the
run; the checker; the report; the orchestration; the entry points (`make soak` among them:
nothing imports it)."""
SAME_LAYER_ORDER = {("probe", "workload")}
"""Packages of one layer that may import one another in this direction only."""
SEPARATE_ROOMS = (
    "eoslab.refbroker.groups",
    "eoslab.refbroker.transactions",
    "eoslab.verify.producer",
    "eoslab.verify.consumer",
    "eoslab.verify.transactions",
    "eoslab.verify.copy",
)
"""Sub-packages that never import each other: the reference broker's coordinators (the broker,
broker.py, wires them together) and the checker's halves (what they share is in
``eoslab.verify.streams``; the checker and the naive checker wire them together)."""
ROOT = Path(eoslab.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def unit(module: str) -> str:
    """The package (or top-level module) of ``eoslab`` a module belongs to."""
    return module.split(".")[1]


def layer(module: str) -> int:
    return next(i for i, names in enumerate(LAYERS) if unit(module) in names)


def _runtime_imports(
    tree: ast.Module, modules: frozenset[str] = frozenset(), *, annotations: bool = False
) -> Iterator[str]:
    """What a module imports when it runs (with ``annotations``, under TYPE_CHECKING too);
    ``from package import submodule`` imports the submodule (and the package's ``__init__``,
    which is not a dependency of its own)."""
    checking = (
        set()
        if annotations
        else {
            id(child)
            for node in ast.walk(tree)
            if isinstance(node, ast.If)
            and ast.unparse(node.test) in {"TYPE_CHECKING", "typing.TYPE_CHECKING"}
            for statement in node.body
            for child in ast.walk(statement)
        }
    )
    for node in ast.walk(tree):
        if id(node) in checking:
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            submodules = [f"{node.module}.{alias.name}" for alias in node.names]
            if all(name in modules for name in submodules):
                yield from submodules
            else:
                yield node.module


def import_graph(*, annotations: bool = False) -> dict[str, set[str]]:
    """Module -> the eoslab modules it imports at run time (with ``annotations``, under
    TYPE_CHECKING too)."""
    modules = {module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        imported = set(_runtime_imports(tree, frozenset(modules), annotations=annotations))
        graph[name] = {m for m in imported if m in modules and m != name}
    return graph


def test_every_package_has_a_layer() -> None:
    placed = set().union(*LAYERS)
    found = {unit(m) for m in import_graph() if m != "eoslab"}
    assert found <= placed, f"give {sorted(found - placed)} a layer in LAYERS"


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Imports of a higher layer, or of another package of the same layer."""
    return sorted(
        f"{module} imports {imported}"
        for module, imports in graph.items()
        if module != "eoslab"
        for imported in imports
        if imported != "eoslab"
        and unit(module) != unit(imported)
        and (
            layer(imported) > layer(module)
            or (
                layer(imported) == layer(module)
                and (unit(module), unit(imported)) not in SAME_LAYER_ORDER
            )
        )
    )


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every loop a depth-first walk of the graph runs into."""
    state: dict[str, int] = {}
    found: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for imported in sorted(graph.get(module, ())):
            if state.get(imported) == 1:
                found.append([*path[path.index(imported) :], imported])
            elif imported not in state:
                visit(imported, [*path, imported])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return found


def test_packages_import_only_along_the_layers() -> None:
    assert upward_imports(import_graph()) == []


def test_the_module_import_graph_has_no_cycle_not_even_through_annotations() -> None:
    assert cycles(import_graph(annotations=True)) == []


def crossings(graph: dict[str, set[str]]) -> list[str]:
    """Imports from one of SEPARATE_ROOMS into another."""

    def room(module: str) -> str | None:
        return next((r for r in SEPARATE_ROOMS if module.startswith(f"{r}.") or module == r), None)

    return sorted(
        f"{module} imports {imported}"
        for module, imports in graph.items()
        for imported in imports
        if room(module) is not None and room(imported) not in (None, room(module))
    )


def test_the_broker_coordinators_and_the_checker_halves_do_not_import_each_other() -> None:
    assert crossings(import_graph()) == []
    planted = {
        "eoslab.refbroker.groups.handlers": {"eoslab.refbroker.transactions.handlers"},
        "eoslab.verify.consumer.ledger": {"eoslab.verify.producer.ledger", "eoslab.verify.streams"},
    }
    assert crossings(planted) == [
        "eoslab.refbroker.groups.handlers imports eoslab.refbroker.transactions.handlers",
        "eoslab.verify.consumer.ledger imports eoslab.verify.producer.ledger",
    ]


def test_the_checks_above_can_fail() -> None:
    """A planted loop, planted upward and sideways imports, and an annotation-only import."""
    planted = {
        "eoslab.runtime.local": {"eoslab.nemesis.nemesis"},
        "eoslab.nemesis.nemesis": {"eoslab.runtime.local"},
        "eoslab.workload.supervisor": {"eoslab.probe.runner"},
        "eoslab.probe.runner": {"eoslab.workload.producer.history"},
    }
    assert upward_imports(planted) == [
        "eoslab.runtime.local imports eoslab.nemesis.nemesis",
        "eoslab.workload.supervisor imports eoslab.probe.runner",
    ]
    assert cycles(planted) == [
        ["eoslab.nemesis.nemesis", "eoslab.runtime.local", "eoslab.nemesis.nemesis"]
    ]
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import eoslab.cli\n")
    assert "eoslab.cli" not in set(_runtime_imports(tree))
    assert "eoslab.cli" in set(_runtime_imports(tree, annotations=True))
    assert "eoslab.cli" in set(_runtime_imports(ast.parse("import eoslab.cli")))
