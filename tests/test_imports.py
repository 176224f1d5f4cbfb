"""The package's architecture, checked by walking its imports (also those inside functions):
no import cycles, and no research module imports the book's machinery (`headlib.book`)."""
from __future__ import annotations

import ast
import graphlib
import re
from pathlib import Path

import pytest

import headlib

PACKAGE = Path(headlib.__file__).parent


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path) -> dict[str, set[str]]:
    """{module: the package's modules it imports}, from every `import` and `from ... import`
    statement anywhere in its source (relative ones resolved)."""
    modules = {module_name(p, root): p for p in root.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                found |= {target} | {f"{target}.{a.name}" for a in node.names}
        graph[name] = {m for m in found if m in modules and m != name and not name.startswith(m + ".")}
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    try:
        list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as e:
        return e.args[1]
    return None


def test_the_check_finds_a_cycle_hidden_in_a_function(tmp_path):
    pkg = tmp_path / "toy"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..a import g\n")
    graph = import_graph(pkg)
    assert graph["toy.a"] == {"toy.sub", "toy.sub.b"} and graph["toy.sub.b"] == {"toy.a"}
    assert set(cycle(graph)) == {"toy.a", "toy.sub.b"}


def test_headlib_has_no_import_cycles():
    graph = import_graph(PACKAGE)
    assert {"headlib.nn.model", "headlib.train.trainer", "headlib.book.runner"} <= set(graph)
    assert graph["headlib.train.trainer"], "the walk found no imports at all"
    assert cycle(graph) is None, f"import cycle: {' -> '.join(cycle(graph))}"


@pytest.mark.parametrize("layer, may_not_import", [
    ("headlib.", "headlib.book"),                # research code never imports the book's machinery
    ("headlib.nn", "headlib.train"),             # the network knows nothing of training,
    ("headlib.nn", "headlib.analysis"),          # nor of the analyses (they hook in by name: nn.hooks)
    ("headlib.nn", "headlib.pruning"),           # nor of pruning,
    ("headlib.analysis", "headlib.train"),       # the analyses nothing of training (the loss is nn.loss),
    ("headlib.data", "headlib.nn"),              # the data nothing of the network
])
def test_layers_import_only_downwards(layer, may_not_import):
    graph = import_graph(PACKAGE)
    offending = sorted(f"{m} imports {d}" for m, ds in graph.items() for d in ds
                       if m.startswith(layer) and not m.startswith(may_not_import) and d.startswith(may_not_import))
    assert not offending, "\n".join(offending)


def test_nothing_outside_train_imports_the_trainer():
    """Outside `headlib.train` the training code is used through its API (`headlib.train`'s
    names), never through `headlib.train.trainer`: not by the package, the notebooks, the
    benchmarks or the scripts."""
    import headlib.train
    graph = import_graph(PACKAGE)
    offending = sorted(m for m, ds in graph.items()
                       if not m.startswith("headlib.train") and "headlib.train.trainer" in ds)
    root = PACKAGE.parent
    sources = [*root.glob("notebooks/*.ipynb"), *root.glob("benchmarks/*.py"), *root.glob("scripts/*")]
    offending += [str(p.relative_to(root)) for p in sources if p.is_file()
                  and re.search(r"(from|import) headlib\.train\.trainer\b|from headlib\.train import [^\n]*\btrainer\b",
                                p.read_text(errors="replace"))]
    assert not offending, "\n".join(offending)
    used = set()
    for path in PACKAGE.rglob("*.py"):
        if path.parent.name != "train":
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module == "headlib.train":
                    used |= {a.name for a in node.names}
    assert used and used <= set(headlib.train.__all__) | {"release", "records", "machine", "pretrained"}, \
        used - set(headlib.train.__all__)
