"""The package's stages import only downward, with no cycles, and the CLI only parses.

Every ``import`` statement counts, those under ``TYPE_CHECKING`` and inside functions included:
a type-only import still ties the higher stage's module to the lower one.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import nrllm_report

PACKAGE = Path(nrllm_report.__file__).parent

# Top to bottom: a module may import its own stage and any stage below it, never one above.
# ``output`` sits low because every stage that writes a file (the site, the store's scratch
# and cache, canonical records) writes it through ``output``.
LAYERS: tuple[str, ...] = (
    "cli",
    "pipeline",
    "reports",
    "site",
    "aggregate",
    "store",
    "check",
    "readers",
    "output",
    "core",
)
# What the command line may import: the pipeline and the shared values, nothing of a stage.
CLI_MAY_IMPORT = frozenset({"pipeline", "core", "__init__"})


def stage_of(module: str) -> str:
    """The stage of a dotted module name inside the package (``site.pages`` is ``site``)."""
    return module.split(".", 1)[0]


def module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(parts) or "__init__"


def imported_modules(path: Path, text: str | None = None) -> set[str]:
    """The package's own modules that ``path`` (or ``text`` standing there) imports, as dotted names."""
    tree = ast.parse(path.read_text(encoding="utf-8") if text is None else text)
    package_parts = module_name(path).split(".")
    if path.name != "__init__.py":
        package_parts = package_parts[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package_parts[: len(package_parts) - node.level + 1]
                stem = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.startswith("nrllm_report"):
                stem = node.module.removeprefix("nrllm_report").lstrip(".")
            else:
                continue
            for alias in node.names:
                candidate = f"{stem}.{alias.name}" if stem else alias.name
                found.add(candidate if _is_module(candidate) else (stem or "__init__"))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("nrllm_report."):
                    found.add(alias.name.removeprefix("nrllm_report."))
    return found


def _is_module(dotted: str) -> bool:
    path = PACKAGE.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def import_graph() -> dict[str, set[str]]:
    return {module_name(path): imported_modules(path) for path in sorted(PACKAGE.rglob("*.py"))}


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a stage to a stage above it."""
    rank = {stage: position for position, stage in enumerate(LAYERS)}
    wrong = []
    for module, imports in graph.items():
        own = rank.get(stage_of(module))
        for imported in imports:
            target = rank.get(stage_of(imported))
            if own is not None and target is not None and target < own:
                wrong.append(f"{module} imports {imported} (stage {LAYERS[target]} is above {LAYERS[own]})")
    return sorted(wrong)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Import cycles between modules (each found once, from its smallest member)."""
    found: list[list[str]] = []

    def visit(start: str, module: str, trail: list[str]) -> None:
        for imported in sorted(graph.get(module, ())):
            if imported == start:
                found.append(trail)
            elif imported > start and imported not in trail:
                visit(start, imported, trail + [imported])

    for start in sorted(graph):
        visit(start, start, [start])
    return found


def test_every_module_belongs_to_a_stage() -> None:
    stages = {stage_of(module) for module in import_graph()} - {"__init__", "__main__"}
    assert stages <= set(LAYERS)


def test_stages_import_only_downward() -> None:
    assert layer_violations(import_graph()) == []


@pytest.mark.slow
def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


@pytest.mark.slow
def test_the_command_line_imports_only_the_pipeline_and_shared_values() -> None:
    assert {stage_of(module) for module in import_graph()["cli"]} <= CLI_MAY_IMPORT


@pytest.mark.slow
@pytest.mark.parametrize(
    ("source", "violation"),
    [
        pytest.param(
            "from ..site.pages import SiteData\n", "check.rows imports site.pages", id="relative-upward"),
        pytest.param(
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from nrllm_report.pipeline import build\n",
            "check.rows imports pipeline", id="type-checking-absolute"),
    ],
)
def test_a_reversed_import_is_caught(source: str, violation: str) -> None:
    """The checks above would fail on an upward import: shown on a planted module."""
    graph = import_graph()
    graph["check.rows"] = imported_modules(PACKAGE / "check" / "rows.py", source)
    assert any(line.startswith(violation) for line in layer_violations(graph))


def test_a_planted_cycle_is_caught() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def _package_trees() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text(encoding="utf-8"))) for path in sorted(PACKAGE.rglob("*.py"))]


@pytest.mark.slow
def test_no_global_statement_and_no_module_level_mutable_containers() -> None:
    """Workers get their state as arguments (core/workers.py), never through module globals."""
    found = []
    for path, tree in _package_trees():
        found += [f"{path.name}:{node.lineno} global" for node in ast.walk(tree) if isinstance(node, ast.Global)]
        for node in tree.body:
            value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
            if isinstance(value, (ast.List, ast.Dict, ast.Set)) and not (
                value.elts if hasattr(value, "elts") else value.keys
            ):
                found.append(f"{path.name}:{node.lineno} empty mutable container")
    assert found == []


MAX_FUNCTION_LINES = 60


def long_functions(trees: list[tuple[Path, ast.Module]], limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """Functions and methods longer than ``limit`` lines, counted from ``def`` to their last line."""
    return [
        f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for path, tree in trees
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > limit
    ]


@pytest.mark.slow
def test_no_function_is_longer_than_sixty_lines() -> None:
    assert long_functions(_package_trees()) == []


def test_a_long_function_is_caught() -> None:
    body = "\n".join(f"    x{number} = {number}" for number in range(MAX_FUNCTION_LINES))
    planted = ast.parse(f"def planted():\n{body}\n\ndef short():\n    return 1\n")
    assert long_functions([(PACKAGE / "planted.py", planted)]) == ["planted.py:1 planted (61 lines)"]


def test_the_store_imports_neither_the_figures_nor_the_site() -> None:
    """The store keeps rows and their spans; what is made of them (figures, pages) is above it."""
    wrong = sorted(f"{module} imports {imported}" for module, imports in import_graph().items()
                   if stage_of(module) == "store" for imported in imports
                   if stage_of(imported) in {"aggregate", "site", "pipeline"})
    assert wrong == []


# Calls that make, change or remove files and folders. ``write_text`` and ``write_bytes``
# count unless they are the site writer's (``site.write_text``), which is output's own.
FILE_CHANGING_CALLS = frozenset({
    "os.replace", "os.rename", "os.remove", "os.unlink", "os.rmdir", "os.makedirs", "os.mkdir", "os.open",
    "shutil.rmtree", "shutil.move", "shutil.copy", "shutil.copyfile", "shutil.copytree", "tempfile.mkstemp",
    "tempfile.mkdtemp", ".mkdir", ".unlink", ".rmdir", ".touch", ".rename", ".replace", ".write_text",
    ".write_bytes", ".symlink_to", ".hardlink_to",
})


def _called_name(call: ast.Call) -> tuple[str, str]:
    """The call's name as ``module.function`` or ``.method``, and its receiver's source."""
    function = call.func
    if isinstance(function, ast.Attribute):
        receiver = ast.unparse(function.value)
        if isinstance(function.value, ast.Name) and function.value.id in {"os", "shutil", "tempfile"}:
            return f"{function.value.id}.{function.attr}", receiver
        return f".{function.attr}", receiver
    return ast.unparse(function), ""


def _writes_a_file(call: ast.Call) -> bool:
    name, receiver = _called_name(call)
    if name in {".write_text", ".write_bytes"} and receiver.split(".")[-1] == "site":
        return False
    if name == ".replace" and not call.args:  # dataclasses' and strings' replace take arguments too
        return False
    if name == ".replace" and len(call.args) == 2:  # str.replace(old, new)
        return False
    if name == "open" or name.endswith(".open"):
        mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
        return isinstance(mode, ast.Constant) and any(flag in str(mode.value) for flag in "wax+")
    return name in FILE_CHANGING_CALLS


def file_writers(trees: list[tuple[Path, ast.Module]]) -> list[str]:
    """Every call outside ``output/`` that makes, changes or removes a file."""
    return sorted(
        f"{path.relative_to(PACKAGE)}:{node.lineno} {ast.unparse(node.func)}"
        for path, tree in trees if path.relative_to(PACKAGE).parts[0] != "output"
        for node in ast.walk(tree) if isinstance(node, ast.Call) and _writes_a_file(node)
    )


@pytest.mark.slow
def test_only_output_writes_files() -> None:
    assert file_writers(_package_trees()) == []


@pytest.mark.parametrize("planted", [
    "Path('x').unlink(missing_ok=True)", "os.replace(a, b)", "open(path, 'wb')", "folder.mkdir(parents=True)",
    "shutil.rmtree(folder)", "path.write_text('x')",
])
def test_a_planted_file_write_is_caught(planted: str) -> None:
    tree = ast.parse(f"def planted():\n    {planted}\n")
    [found] = file_writers([(PACKAGE / "store" / "planted.py", tree)])
    assert found.startswith("store/planted.py:2 ")


MAX_POSITIONAL = 2
# Functions that keep more than two positional parameters, because something else calls them so.
POSITIONAL_ALLOWED = frozenset({
    # click command callbacks: click passes every parameter by keyword anyway.
    "cli.validate", "cli.normalize", "cli.build", "cli.timeline", "cli.diff",
    # click option callbacks: click calls them as callback(context, parameter, value).
    "cli.parse_languages", "cli.parse_timezone", "cli.parse_fail_on_change", "cli.parse_fail_on",
    "cli.budgets_option.callback",
    # The context manager protocol: ``with`` calls __exit__(kind, error, traceback).
    "output.writer.atomic_file.__exit__", "output.writer.SiteWriter.__exit__",
    # Bound with functools.partial (pages.tool_lists) and called as stem_of(which) by pages.calls_lists.
    "site.urls.tool_runs_stem",
})


def _qualified_functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef, bool]]:
    """Every function and method as (qualified name, node, whether it is a method), nested ones too."""
    def visit(body: list[ast.stmt], prefix: str, in_class: bool) -> Iterator[Any]:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield f"{prefix}{node.name}", node, in_class
                yield from visit(node.body, f"{prefix}{node.name}.", False)
            elif isinstance(node, ast.ClassDef):
                yield from visit(node.body, f"{prefix}{node.name}.", True)
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    yield from visit([child for child in getattr(node, field, []) if isinstance(child, ast.AST)],
                                     prefix, in_class)
    yield from visit(tree.body, "", False)


def positional_count(node: ast.FunctionDef | ast.AsyncFunctionDef, is_method: bool) -> int:
    """The parameters a call may fill by position: ``self``/``cls`` not counted, ``*args`` counted as one."""
    positional = [*node.args.posonlyargs, *node.args.args]
    static = any(isinstance(decorator, ast.Name) and decorator.id == "staticmethod"
                 for decorator in node.decorator_list)
    if is_method and not static and positional and positional[0].arg in {"self", "cls"}:
        positional = positional[1:]
    return len(positional) + (node.args.vararg is not None)


def too_positional(trees: list[tuple[Path, ast.Module]]) -> list[str]:
    """Functions taking more than MAX_POSITIONAL positional parameters, as ``module:line name``."""
    found = []
    for path, tree in trees:
        module = module_name(path)
        for name, node, is_method in _qualified_functions(tree):
            if positional_count(node, is_method) > MAX_POSITIONAL and f"{module}.{name}" not in POSITIONAL_ALLOWED:
                found.append(f"{module}:{node.lineno} {name}")
    return found


def test_functions_take_at_most_two_positional_parameters() -> None:
    """Past the first two (the subjects: ``render(page, labels, *, ...)``), parameters are keyword-only."""
    assert too_positional(_package_trees()) == []


@pytest.mark.parametrize(("source", "caught"), [
    ("def planted(a, b, c):\n    pass\n", ["planted:1 planted"]),
    ("def planted(a, b, *rest):\n    pass\n", ["planted:1 planted"]),
    ("class Planted:\n    def method(self, a, b, c):\n        pass\n", ["planted:2 Planted.method"]),
    ("def outer():\n    def inner(a, b, c):\n        pass\n", ["planted:2 outer.inner"]),
    ("class Planted:\n    @staticmethod\n    def method(a, b, c):\n        pass\n", ["planted:3 Planted.method"]),
    ("class Planted:\n    def method(self, a, b, *, c):\n        pass\n", []),
    ("def planted(a, *rest, c):\n    pass\n", []),
])
def test_too_many_positional_parameters_are_caught(source: str, caught: list[str]) -> None:
    assert too_positional([(PACKAGE / "planted.py", ast.parse(source))]) == caught


def test_every_allowed_function_still_takes_more_than_two() -> None:
    """An allowed name that no longer names a function with too many positional parameters is dropped."""
    named = {f"{module_name(path)}.{name}" for path, tree in _package_trees()
             for name, node, is_method in _qualified_functions(tree)
             if positional_count(node, is_method) > MAX_POSITIONAL}
    assert sorted(POSITIONAL_ALLOWED - named) == []
