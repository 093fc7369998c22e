"""The import rule of minigluon's floors, read from the source with `ast` (nothing is imported).

Every module of the package belongs to a unit (its first name below `minigluon`: `autograd`,
`ndarray`, `gluon`, ...) and every unit to a floor. A module may import from its own floor or
from lower ones; an import found anywhere in a file counts, inside a function too, because a
late import is still a dependency that makes the lower floor unusable without the upper one.
Three rules, each a list of violations (empty when the tree keeps them):

- `upward_imports`: an import from a higher floor;
- `import_cycles`: modules that reach each other through imports, on any floor;
- `private_imports`: a private name (`_name`, not a dunder) taken from another module.

docs/architecture.md describes the floors in words; FLOORS below is the rule itself.
"""
import ast
import collections
import os

# Lowest floor first. A new top-level module or subpackage must be placed here, or
# `unplaced_units` names it.
FLOORS = (
    ("foundation", ("base", "config", "context", "_allocator", "profiler", "runtime",
                    "name", "telemetry", "threads")),
    ("autograd", ("autograd",)),
    ("ndarray", ("ndarray", "random")),
    ("front ends", ("symbol", "numpy", "numpy_extension", "util")),
    ("library", ("initializer", "lr_scheduler", "optimizer", "metric", "recordio", "image",
                 "io")),
    ("module", ("module",)),
    ("kvstore", ("kvstore",)),
    ("gluon", ("gluon",)),
    ("tools", ("tools", "test_utils", "")),      # "" is minigluon/__init__.py itself
)


def floor_of(unit):
    """The index of the floor that holds `unit`, or None when FLOORS does not place it."""
    for level, (_, units) in enumerate(FLOORS):
        if unit in units:
            return level
    return None


class Tree:
    """The modules of one package directory and the imports between them."""

    def __init__(self, package_dir):
        self.package = os.path.basename(os.path.normpath(package_dir))
        self.root = os.path.dirname(os.path.normpath(package_dir))
        self.files = self._find_modules(package_dir)
        self.imports = {name: self._imports_of(name) for name in self.files}

    def _find_modules(self, package_dir):
        files = {}
        for folder, _, names in os.walk(package_dir):
            for name in names:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    parts = os.path.relpath(path, self.root)[:-3].split(os.sep)
                    if parts[-1] == "__init__":
                        parts = parts[:-1]
                    files[".".join(parts)] = path
        return files

    def is_package(self, module):
        return self.files[module].endswith("__init__.py")

    def unit(self, module):
        """`minigluon.gluon.nn.conv_layers` -> `gluon`; the package itself -> ``."""
        parts = module.split(".")
        return parts[1] if len(parts) > 1 else ""

    def _imports_of(self, module):
        """(line, imported module, imported name or None) for each import in the file."""
        with open(self.files[module]) as f:
            tree = ast.parse(f.read(), self.files[module])
        found = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found += [(node.lineno, a.name, None) for a in node.names if self._ours(a.name)]
            elif isinstance(node, ast.ImportFrom):
                target = self._absolute(module, node)
                if self._ours(target):
                    found += [(node.lineno, target, a.name) for a in node.names]
        return found

    def _ours(self, name):
        return name == self.package or name.startswith(self.package + ".")

    def _absolute(self, module, node):
        if not node.level:
            return node.module or ""
        base = module.split(".") if self.is_package(module) else module.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))

    def resolve(self, target, name):
        """The module an import loads: `from pkg import sub` loads pkg.sub when it is a module."""
        if name and f"{target}.{name}" in self.files:
            return f"{target}.{name}"
        while target not in self.files and "." in target:
            target = target.rpartition(".")[0]
        return target

    def edges(self):
        """module -> {(imported module, line)}, without imports of itself."""
        out = collections.defaultdict(set)
        for module, found in self.imports.items():
            for line, target, name in found:
                dest = self.resolve(target, name)
                if dest != module and dest in self.files:
                    out[module].add((dest, line))
        return out


def unplaced_units(tree):
    return sorted({tree.unit(m) for m in tree.files if floor_of(tree.unit(m)) is None})


def upward_imports(tree):
    """'file:line: unit (floor) imports unit (floor)' for each import from a higher floor."""
    found = []
    for module, dests in sorted(tree.edges().items()):
        here = floor_of(tree.unit(module))
        for dest, line in sorted(dests):
            there = floor_of(tree.unit(dest))
            if here is not None and there is not None and there > here:
                found.append(f"{_where(tree, module, line)}: {module} (floor "
                             f"'{FLOORS[here][0]}') imports {dest} (floor '{FLOORS[there][0]}')")
    return found


def import_cycles(tree):
    """Each group of modules that import one another, directly or around a circle."""
    graph = {m: {d for d, _ in dests} for m, dests in tree.edges().items()}
    return [sorted(group) for group in _strongly_connected(graph, sorted(tree.files))
            if len(group) > 1]


def private_imports(tree):
    """'file:line: module takes _name from other' for each private name crossing modules."""
    found = []
    for module, imports in sorted(tree.imports.items()):
        for line, target, name in imports:
            if name and name.startswith("_") and not name.startswith("__"):
                if f"{target}.{name}" in tree.files and target == module:
                    continue        # a package importing its own private submodule
                found.append(f"{_where(tree, module, line)}: {module} takes {name} "
                             f"from {target}")
    return found


def _where(tree, module, line):
    return f"{os.path.relpath(tree.files[module], tree.root)}:{line}"


def _strongly_connected(graph, nodes):
    """Tarjan's algorithm without recursion: the strongly connected groups of `graph`."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    groups.append(group)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return groups
