#!/usr/bin/python3
"""Finds import circles in the tree's Python, TypeScript (and JavaScript),
Java, Go and shell, so that no two files must change together because each
reaches into the other. C++ is held by tests/layering/check_layering.py
(its includes, the whole tree); this check reads the other languages, test
code included.

What is an arrow, per language (only arrows between files of the tree; a
library's module is not followed):

  Python      an import statement anywhere in a module (inside a function
              and under `if TYPE_CHECKING:` too): `import a.b`, `from a
              import b`, `from . import b`, `from .a import b`. A name is
              looked for as a package or module beside the importing file,
              then (absolute imports inside a package) from the folder that
              holds the package's top; `from p import m` reaches p/m.py when
              m is a module, else p/__init__.py. Imports through a folder a
              script adds to sys.path (testing/) are not followed.
  TypeScript  `import ... from '<relative>'`, `export ... from`, `import
  JavaScript  '<relative>'`, `import('<relative>')` and `require(...)`,
              type-only imports included (a circle of types is still two
              files that change together); not in comments. './x.js' is
              x.ts when that exists (how TypeScript's NodeNext names its
              own modules).
  Java        within a package (its main and test folders together), a
              class that names another class of its package (comments and
              strings aside); across packages of the tree, an import. A
              file is one class (its nested classes are part of it).
  Go          an import of another package of the same module (go.mod): the
              compiler refuses such a circle too; this says so before a
              build does.
  Shell       `. FILE` or `source FILE` (or a `# shellcheck source=FILE`
              note): FILE's literal tail after its last variable, looked
              for beside the script, then from the tree's top.

Build trees, node_modules/, .git/ and __pycache__/ are not read.

Usage: check_import_circles.py SOURCE_ROOT
Prints each circle (its files, first = last, and the language) and exits 1
if there is any; else prints how many files and arrows it read per language
and exits 0. It exits 1 too when it reads no arrow at all (a wrong root must
not pass). check_import_circles_test.py plants a circle in each language
and expects it to be refused.
"""
import ast
import os
import re
import sys

from java_ts_functions import blank

NOT_READ = {".git", "node_modules", "__pycache__"}
TYPESCRIPT = (".ts", ".mts", ".cts", ".mjs", ".cjs", ".js")
JS_IMPORT = re.compile(
    r"""(?:\bfrom\s*|\bimport\s*\(?\s*|\brequire\s*\(\s*)"""
    r"""(['"])(\.{1,2}/[^'"]+)\1""")
SHELL_SOURCE = re.compile(
    r"""^\s*(?:\.|source)\s+([^;&|#\n]+)|#\s*shellcheck\s+source=(\S+)""",
    re.M)
SHELL_EXPANSION = re.compile(r"\$\{[^}]*\}|\$\([^)]*\)|\$\w+")


def tree_files(root):
    for dirpath, dirs, files in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if "CMakeCache.txt" in files:
            dirs[:] = []
            continue
        dirs[:] = sorted(d for d in dirs if d not in NOT_READ and not (
            rel_dir == "." and d.startswith("build")))
        for name in sorted(files):
            yield os.path.normpath(os.path.join(rel_dir, name))


def language_of(path):
    if path.endswith(".py"):
        return "Python"
    if path.endswith(TYPESCRIPT):
        return "TypeScript"
    if path.endswith(".java"):
        return "Java"
    if path.endswith(".go"):
        return "Go"
    if path.endswith(".sh"):
        return "shell"
    return None


def existing(root, *candidates):
    """The first candidate (a path relative to root) that is a file."""
    for c in candidates:
        c = os.path.normpath(c)
        if not c.startswith("..") and os.path.isfile(os.path.join(root, c)):
            return c
    return None


def package_top(root, folder):
    """The folder holding the outermost package around folder (folder
    itself when it is no package)."""
    while folder not in ("", ".") and os.path.isfile(
            os.path.join(root, folder, "__init__.py")):
        folder = os.path.dirname(folder)
    return folder


def python_module(root, bases, dotted):
    """The file a dotted name names, looked for from each base folder."""
    parts = dotted.split(".")
    for base in bases:
        found = existing(root, os.path.join(base, *parts) + ".py",
                         os.path.join(base, *parts, "__init__.py"))
        if found:
            return found
    return None


def python_arrows(root, path, text):
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    here = os.path.dirname(path)
    bases = [here, package_top(root, here)]
    arrows = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                arrows.append(python_module(root, bases, alias.name))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here
                for _ in range(node.level - 1):
                    base = os.path.dirname(base)
                froms = [base]
            else:
                froms = bases
            module = node.module or ""
            target = python_module(root, froms, module) if module else \
                existing(root, os.path.join(froms[0], "__init__.py"))
            subs = [python_module(root, froms, (module + "." if module else "")
                                  + alias.name) for alias in node.names]
            if any(subs):
                arrows.extend(subs)
            else:
                arrows.append(target)
    return [a for a in arrows if a and a != path]


def ts_arrows(root, path, text):
    here = os.path.dirname(path)
    code = blank(text, typescript=True)  # to tell comments from code
    arrows = []
    for m in JS_IMPORT.finditer(text):
        if code[m.start()] != text[m.start()]:
            continue  # in a comment (or a string)
        target = os.path.join(here, m.group(2))
        stem, ext = os.path.splitext(target)
        if ext in (".js", ".mjs", ".cjs"):
            ts = {".js": ".ts", ".mjs": ".mts", ".cjs": ".cts"}[ext]
            found = existing(root, stem + ts, target)
        else:
            found = existing(root, target, *(target + e for e in (
                ".ts", ".mts", ".cts", ".js", ".mjs", ".cjs", "/index.ts",
                "/index.js")))
        if found:
            arrows.append(found)
    return arrows


JAVA_PACKAGE = re.compile(r"^\s*package\s+([\w.]+)\s*;", re.M)


def java_package(text):
    m = JAVA_PACKAGE.search(blank(text, typescript=False))
    return m.group(1) if m else ""


def java_arrows(path, text, packages):
    """packages: package name -> {class name: path} of every .java in the
    tree (a package's main and test folders are one package)."""
    code = blank(text, typescript=False)
    me = os.path.splitext(os.path.basename(path))[0]
    mine = packages.get(java_package(text), {})
    arrows = [p for name, p in mine.items()
              if name != me and re.search(r"(?<![\w$.])" + re.escape(name)
                                          + r"\b", code)]
    for m in re.finditer(r"^\s*import\s+(?:static\s+)?([\w.]+)\s*;", code,
                         re.M):
        parts = m.group(1).split(".")
        for cut in (len(parts), len(parts) - 1):
            package, name = ".".join(parts[:cut - 1]), parts[cut - 1]
            target = packages.get(package, {}).get(name)
            if target and target != path:
                arrows.append(target)
    return arrows


def go_arrows(root, path, text, modules):
    """modules: folder of a go.mod -> its module path."""
    arrows = []
    block = re.search(r"^import\s*\((.*?)^\)", text, re.M | re.S)
    specs = re.findall(r'"([^"]+)"', block.group(1)) if block else []
    specs += re.findall(r'^import\s+(?:\w+\s+)?"([^"]+)"', text, re.M)
    for spec in specs:
        for folder, module in modules.items():
            if spec == module or spec.startswith(module + "/"):
                target = os.path.join(folder, spec[len(module):].lstrip("/"))
                if os.path.isdir(os.path.join(root, target)):
                    arrows.append(os.path.normpath(target) + "/")
    return arrows


def literal_tail(word):
    """What a shell word names after its last expansion:
    "$(dirname "$0")/lib.sh" -> lib.sh, "$ROOT/a/b.sh" -> a/b.sh."""
    parts = SHELL_EXPANSION.split(word)
    tail = parts[-1].strip("\"' )}")
    if len(parts) > 1:
        tail = tail.lstrip("/")
    return tail.split()[0] if tail.split() else ""


def shell_arrows(root, path, text):
    here = os.path.dirname(path)
    arrows = set()
    for m in SHELL_SOURCE.finditer(text):
        tail = literal_tail(m.group(1) or m.group(2))
        if not tail:
            continue
        found = existing(root, os.path.join(here, tail), tail)
        if found and found != path:
            arrows.add(found)
    return sorted(arrows)


def read_graph(root):
    """{language: {node: [nodes it reaches]}}; a Go node is a package's
    folder (ending in /), every other node a file."""
    files = [(p, language_of(p)) for p in tree_files(root)]
    files = [(p, lang) for p, lang in files if lang]
    packages, modules = {}, {}
    for p, lang in files:
        if lang == "Java":
            with open(os.path.join(root, p), encoding="utf-8") as f:
                packages.setdefault(java_package(f.read()), {})[
                    os.path.splitext(os.path.basename(p))[0]] = p
    for p in tree_files(root):
        if os.path.basename(p) == "go.mod":
            with open(os.path.join(root, p), encoding="utf-8") as f:
                m = re.search(r"^module\s+(\S+)", f.read(), re.M)
            if m:
                modules[os.path.dirname(p)] = m.group(1)
    graph = {}
    for p, lang in files:
        with open(os.path.join(root, p), encoding="utf-8",
                  errors="replace") as f:
            text = f.read()
        if lang == "Python":
            arrows = python_arrows(root, p, text)
        elif lang == "TypeScript":
            arrows = ts_arrows(root, p, text)
        elif lang == "Java":
            arrows = java_arrows(p, text, packages)
        elif lang == "Go":
            if p.endswith("_test.go"):
                continue  # its package's tests: in the package, not above
            node = os.path.dirname(p) + "/"
            g = graph.setdefault(lang, {})
            g[node] = sorted(set(g.get(node, [])) |
                             set(go_arrows(root, p, text, modules)) - {node})
            continue
        else:
            arrows = shell_arrows(root, p, text)
        graph.setdefault(lang, {})[p] = sorted(set(arrows))
    return graph


def circles(graph):
    """Every circle of graph, each once: a list of nodes, first = last,
    starting at its smallest node."""
    found = set()
    index, low, stack, on_stack = {}, {}, [], set()
    components = []

    def strongconnect(v):
        # Tarjan's strongly connected components, iteratively.
        work = [(v, iter(graph.get(v, [])))]
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(graph.get(w, []))))
                    advanced = True
                    break
                if w in on_stack:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == node:
                        break
                if len(component) > 1:
                    components.append(set(component))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    for component in components:
        # One circle per tangle: the shortest way from its smallest node
        # back to itself.
        start = min(component)
        paths, seen = [[start]], {start}
        while paths:
            path = paths.pop(0)
            for w in sorted(graph.get(path[-1], [])):
                if w == start:
                    found.add(tuple(path + [start]))
                    paths = []
                    break
                if w in component and w not in seen:
                    seen.add(w)
                    paths.append(path + [w])
    return sorted(list(c) for c in found)


def main(argv):
    if len(argv) != 2:
        print(f"usage: {argv[0]} SOURCE_ROOT", file=sys.stderr)
        return 2
    graph = read_graph(argv[1])
    errors, summary = [], []
    for lang in sorted(graph):
        for circle in circles(graph[lang]):
            errors.append(f"{lang} import circle: {' -> '.join(circle)}: "
                          f"give one side a narrow interface of its own, or "
                          f"move what both need below them")
        arrows = sum(len(v) for v in graph[lang].values())
        summary.append(f"{lang} {len(graph[lang])} files, {arrows} arrows")
    for e in errors:
        print(e)
    if errors:
        return 1
    if not any(graph[lang][n] for lang in graph for n in graph[lang]):
        print(f"{argv[1]}: no import between the tree's own files found",
              file=sys.stderr)
        return 1
    print(f"no import circle ({'; '.join(summary)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
