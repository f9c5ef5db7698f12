#!/usr/bin/python3
"""Holds every function of the project's own C++, Python, Go, Java and
TypeScript (and JavaScript) to at most 100 lines, so that a function is a
step a reader can hold in mind, and a longer one is split into its steps.

What is read: every .cc, .h, .cpp, .hpp, .py, .go, .java, .ts, .mts, .cts,
.mjs, .cjs and .js under SOURCE_ROOT except test files (*_test.go,
*_test.py, test_*.py, conftest.py, *Test.java, *.test.ts, *.spec.ts and
their .js/.mjs kin) and what is under tests/, test/ (clients/java/src/test,
clients/node/test), __tests__/, bench/, fuzz/ and testing/ (any depth),
build trees (a folder with a CMakeCache.txt, or a top-level build*), .git/
and node_modules/. Java and TypeScript are read by java_ts_functions.py,
whose docstring says what a function is there: methods, constructors and
initializer blocks, and lambdas and arrow functions outside any function;
anything inside a function (lambdas, anonymous classes) is part of it.

C++: a function is a body in braces whose head ends like a function's: a
parameter list, then at most qualifiers (const, noexcept, override, final,
mutable, &, &&), a trailing return type (-> T), an annotation macro
(ABSL_LOCKS_EXCLUDED(mu_)) or a constructor's member initializers; or a
lambda given to a name outside any function (kX = [] {...}). Bodies inside a
namespace, a class, struct, union or enum, or extern "C" are read; a
namespace or a class is not itself a function, however long. Everything
inside a function (lambdas, local classes, blocks) is part of it and is not
counted apart. A braced initializer outside a function ({1, 2}, a table, a
lambda in a constructor's member initializer) is not a function, and what is
inside it is not read. Comments, string and character literals (raw strings
R"x(...)x" too) and preprocessor lines are blanked before braces are read,
so a brace in any of them does not count. A file whose braces do not balance
after that (say, #if branches that each open a function) is reported as
unreadable and fails the check: it must not pass by being misread.

C++, Go, Java and TypeScript: a function's length is the lines from the
one holding its opening brace to the one holding its closing brace, both
counted, blank lines and comments included. So `void F() {` on line 10 and
its `}` on line 109 is 109 - 10 + 1 = 100 lines: the most allowed. Go is
read the same way (comments, strings, runes and `raw strings` blanked); each
top-level func is one function, func literals inside it part of it.

Python: a function or method runs from its def line to its body's last line
(as the ast module reports it); a def inside a function is part of it.

Usage: check_function_length.py [--max_lines=N]
           [--allow=PATH,FUNCTION,LINES]... SOURCE_ROOT
Prints one line per function over the limit (file:line: function, its lines,
the limit) and exits 1 if there is any; else prints how many files and
functions it read and the longest, and exits 0. It exits 1 too when it reads
no function at all (a wrong root must not pass).

An --allow admits one function over the limit for now (tests/CMakeLists.txt
gives each its reason and issue): it passes while it is at most LINES long,
fails when it grows past them, and fails when it is no longer over the limit
(or gone), so that the admission goes when the long function does.
check_function_length_test.py plants long and tricky functions in a small tree
and expects each verdict.
"""
import ast
import os
import re
import sys

import java_ts_functions
from java_ts_functions import UnreadableFile, depth_zero

MAX_LINES = 100
CPP = (".cc", ".h", ".cpp", ".hpp")
TYPESCRIPT = (".ts", ".mts", ".cts", ".mjs", ".cjs", ".js")
SOURCE = CPP + (".py", ".go", ".java") + TYPESCRIPT
NOT_READ_FOLDERS = {"tests", "test", "__tests__", "bench", "fuzz", "testing",
                    ".git", "node_modules", "__pycache__"}
TEST_FILE = re.compile(r"(?:_test\.go|_test\.py|^test_.*\.py|^conftest\.py"
                       r"|Test\.java|\.(?:test|spec)\.[mc]?[jt]s)$")
GO_NOT_CODE = re.compile(
    r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'|`[^`]*`",
    re.DOTALL)

RAW_STRING_PREFIX = re.compile(r"(?:u8|u|U|L)?R$")
QUALIFIERS = re.compile(
    r"^(?:\s*(?:const|volatile|noexcept|override|final|mutable|&&|&"
    r"|[A-Z][A-Z0-9_]*(?:\(\))?))*\s*(?:->.*)?$")
LAMBDA_HEAD = re.compile(r"=\s*\[[^\]]*\]\s*(?:mutable\s*)?$")
CTOR_COLON = re.compile(r"\)\s*(?:noexcept\s*)?:(?!:)")
NAME_BEFORE_PARAMS = re.compile(
    r"((?:~?[A-Za-z_]\w*(?:<[^()]*>)?::)*(?:operator\s*\S+?|~?[A-Za-z_]\w*))"
    r"\s*$")


def blank(text):
    """text with comments, literals and preprocessor lines turned to spaces
    (newlines kept, so offsets and line numbers stay)."""
    out = list(text)
    i, n = 0, len(text)
    line_start = True  # only spaces since the last newline

    def wipe(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if c == "\n":
            line_start = True
            i += 1
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if line_start and c == "#":
            j = i
            while j < n and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j, n)
            wipe(i, j)
            i = j
            continue
        line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            wipe(i, j)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            wipe(i, j)
            i = j
        elif c == '"' and starts_raw_string(text, i):
            paren = text.find("(", i)
            delimiter = text[i + 1:paren]
            end = text.find(")" + delimiter + '"', paren)
            j = n if end < 0 else end + len(delimiter) + 2
            wipe(i, j)
            i = j
        elif c == '"' or (c == "'" and not in_number(text, i)):
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            wipe(i, j)
            i = j
        else:
            i += 1
    return "".join(out)


def starts_raw_string(text, i):
    """Whether the " at i opens a raw string (R"x(, u8R"x(, LR"x( ...)."""
    m = RAW_STRING_PREFIX.search(text[max(0, i - 3):i])
    if not m:
        return False
    start = i - len(m.group())
    return start == 0 or not is_word(text[start - 1])


def is_word(c):
    return c.isalnum() or c == "_"


def in_number(text, i):
    """Whether the ' at i is a digit separator (1'000), not a literal."""
    j = i
    while j > 0 and (is_word(text[j - 1]) or text[j - 1] == "."):
        j -= 1
    return j < i and text[j].isdigit()


def classify(head):
    """What a { opens, given the text since the last ;, { or } before it at
    the same level: 'scope' (namespace, class, extern "C": read inside),
    'function', or 'other' (an initializer: not read inside)."""
    head = " ".join(head.split())
    if re.search(r"\bnamespace\b", head) or re.match(r"extern\b", head):
        return "scope"
    flat = depth_zero(head)
    if flat is None:
        return "other"  # a brace inside an open (: an argument
    flat = re.sub(r"^(?:template\s*<[^{}]*?>\s*)+", "", flat)
    ctor = CTOR_COLON.search(flat)
    if ctor:
        rest = flat[ctor.end():].strip()
        return "function" if rest.endswith((")", "{}")) else "other"
    if ")" in flat and QUALIFIERS.match(flat[flat.rindex(")") + 1:]):
        return "function"
    if LAMBDA_HEAD.search(flat):
        return "function"  # a lambda without parameters: x = [] { ... }
    if re.search(r"\b(?:class|struct|union|enum)\b", flat) and "=" not in flat:
        return "scope"
    return "other"


def function_name(head):
    head = " ".join(head.split())
    head = re.sub(r"^(?:template\s*<[^{}]*?>\s*)+", "", head)
    if LAMBDA_HEAD.search(head):
        return "(lambda)"
    depth = 0
    for k, c in enumerate(head):
        if c == "(":
            if depth == 0:
                before = head[:k]
                if before.rstrip().endswith("]"):
                    return "(lambda)"
                m = NAME_BEFORE_PARAMS.search(before)
                if m and not before.rstrip().endswith("operator"):
                    return m.group(1).replace(" ", "")
            depth += 1
        elif c == ")":
            depth -= 1
    return "(unnamed)"


def functions(text):
    """(first line, name, lines) of every function in C++ source text."""
    code = blank(text)
    found = []
    # ('scope' | 'function' | 'other' | 'block', offset of the {, head); a
    # 'block' is any brace inside a function or an initializer.
    stack = []
    head_start = 0
    pieces = []  # head text of the current declaration, 'other' {} folded
    line_of = lambda offset: code.count("\n", 0, offset) + 1  # noqa: E731
    for m in re.finditer(r"[{};]", code):
        i, c = m.start(), m.group()
        inside = stack[-1][0] if stack else "scope"
        if inside in ("function", "other"):
            if c == "{":
                stack.append(("block", i, ""))
            elif c == "}":
                kind, start, head = stack.pop()
                if kind == "function":
                    first = line_of(start)
                    found.append((first, function_name(head),
                                  line_of(i) - first + 1))
                    pieces = []
                else:  # an initializer: its head goes on (x{1};, a_{1}, b_)
                    pieces.append("{}")
                head_start = i + 1
            continue
        if inside == "block":
            if c == "{":
                stack.append(("block", i, ""))
            elif c == "}":
                stack.pop()
            continue
        # At a scope's level: a declaration's head is being read.
        head = "".join(pieces) + code[head_start:i]
        if c == ";":
            pieces, head_start = [], i + 1
        elif c == "{":
            stack.append((classify(head), i, head))
            pieces, head_start = ([head] if stack[-1][0] == "other" else []), \
                i + 1
        else:
            if not stack:
                raise UnreadableFile(f"line {line_of(i)}: a }} closes nothing")
            stack.pop()
            pieces, head_start = [], i + 1
    if stack:
        raise UnreadableFile(
            f"line {line_of(stack[-1][1])}: a {{ is never closed")
    return found


def python_functions(text):
    """(first line, name, lines) of every function and method in Python
    source: from its def line to its body's last line (decorators and
    trailing comments aside). A def inside a function is part of it."""
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        raise UnreadableFile(f"line {e.lineno}: not Python: {e.msg}")
    found = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((child.lineno, prefix + child.name,
                              child.end_lineno - child.lineno + 1))
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def go_functions(text):
    """(first line, name, lines) of every top-level func in Go source (a
    func literal inside one is part of it), lines counted as for C++. The
    body's { is the first at parenthesis depth 0 after `func`, type
    literals' (interface{}, struct{...}) aside; a newline before it ends a
    declaration without a body."""
    code = GO_NOT_CODE.sub(
        lambda m: re.sub(r"[^\n]", " ", m.group()), text)
    line_of = lambda offset: code.count("\n", 0, offset) + 1  # noqa: E731
    found, depth, i = [], 0, 0
    while i < len(code):
        c = code[i]
        if c in "{}":
            depth += 1 if c == "{" else -1
        elif depth == 0 and code.startswith("func", i) and not (
                i > 0 and is_word(code[i - 1])) and not is_word(
                    code[i + 4:i + 5] or " "):
            start = go_body(code, i + 4)
            if start is not None:
                end = matching_brace(code, start)
                name = re.match(r"\s*(?:\([^)]*\)\s*)?(\w+)?",
                                code[i + 4:start]).group(1) or "(func literal)"
                first = line_of(start)
                found.append((first, name, line_of(end) - first + 1))
                i = end
        i += 1
    if depth != 0:
        raise UnreadableFile("its braces do not balance")
    return found


def go_body(code, i):
    """Offset of the { that opens the body of the func whose signature
    starts at i, or None when the declaration has no body."""
    parens = 0
    while i < len(code):
        c = code[i]
        if c == "(":
            parens += 1
        elif c == ")":
            parens -= 1
        elif c == "\n" and parens == 0:
            return None
        elif c == "{":
            if re.search(r"\b(?:interface|struct)\s*$", code[:i]):
                i = matching_brace(code, i)
            elif parens == 0:
                return i
        i += 1
    return None


def matching_brace(code, i):
    depth = 0
    for k in range(i, len(code)):
        if code[k] == "{":
            depth += 1
        elif code[k] == "}":
            depth -= 1
            if depth == 0:
                return k
    raise UnreadableFile(f"line {code.count(chr(10), 0, i) + 1}: a {{ is "
                         f"never closed")


def functions_of(path, text):
    if path.endswith(".py"):
        return python_functions(text)
    if path.endswith(".go"):
        return go_functions(text)
    if path.endswith(".java"):
        return java_ts_functions.functions(text, typescript=False)
    if path.endswith(TYPESCRIPT):
        return java_ts_functions.functions(text, typescript=True)
    return functions(text)


def source_files(root):
    for dirpath, dirs, files in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if "CMakeCache.txt" in files:
            dirs[:] = []
            continue
        dirs[:] = sorted(d for d in dirs if d not in NOT_READ_FOLDERS and not (
            rel_dir == "." and d.startswith("build")))
        for name in sorted(files):
            if name.endswith(SOURCE) and not TEST_FILE.search(name):
                yield os.path.normpath(os.path.join(rel_dir, name))


def parse_allow(value):
    path, name, lines = value.split(",")
    return (path, name), int(lines)


def main(argv):
    limit, allowed, args = MAX_LINES, {}, []
    for a in argv[1:]:
        if a.startswith("--max_lines="):
            limit = int(a.split("=", 1)[1])
        elif a.startswith("--allow="):
            key, lines = parse_allow(a.split("=", 1)[1])
            allowed[key] = lines
        else:
            args.append(a)
    if len(args) != 1:
        print(f"usage: {argv[0]} [--max_lines=N] [--allow=PATH,FUNCTION,LINES]"
              f"... SOURCE_ROOT", file=sys.stderr)
        return 2
    root = args[0]
    errors, read, files, longest = [], [], 0, None
    seen_allowed = set()
    for path in source_files(root):
        files += 1
        with open(os.path.join(root, path), encoding="utf-8") as f:
            text = f.read()
        try:
            found = functions_of(path, text)
        except UnreadableFile as e:
            errors.append(f"{path}:{e}; the check cannot read this file's "
                          f"functions: keep each brace out of #if branches")
            continue
        for line, name, n in found:
            read.append((path, line, name, n))
            if longest is None or n > longest[3]:
                longest = (path, line, name, n)
            if n <= limit:
                continue
            cap = allowed.get((path, name))
            if cap is None:
                errors.append(f"{path}:{line}: {name} is {n} lines; a "
                              f"function has at most {limit}: split it into "
                              f"its steps")
            elif n > cap:
                seen_allowed.add((path, name))
                errors.append(f"{path}:{line}: {name} is {n} lines, longer "
                              f"than the {cap} it is allowed for now: split "
                              f"it, do not let it grow")
            else:
                seen_allowed.add((path, name))
                print(f"{path}:{line}: {name} is {n} lines, allowed for now "
                      f"(at most {cap})")
    for path, name in sorted(set(allowed) - seen_allowed):
        errors.append(f"{path}: {name} is allowed over {limit} lines but is "
                      f"not over them (or is gone): remove its --allow")
    for e in errors:
        print(e)
    if errors:
        return 1
    if not read:
        print(f"{root}: no function found", file=sys.stderr)
        return 1
    path, line, name, n = longest
    print(f"{len(read)} functions in {files} files checked, none over {limit} "
          f"lines unless allowed (the longest: {path}:{line} {name}, {n})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
