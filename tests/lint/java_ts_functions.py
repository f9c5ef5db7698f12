"""Reads the functions of Java and TypeScript (or JavaScript) source for
check_function_length.py: (line of the opening brace, name, lines) of each.

Both are read as the check reads C++: comments and literals are blanked
first, then braces are followed. A brace at the level of a file, a class
(an interface, an enum, a record, a TypeScript namespace) or an object
literal outside any function opens one of:

  a function   Java: a method or constructor (a parameter list, then at most
               `throws ...`), an initializer block (`{` or `static {`), a
               lambda with a block body given to a field (`x = () -> {`).
               TypeScript: a function declaration or expression, a method,
               getter, setter or constructor (a parameter list, then at most
               a return type), a class's `static {` block, and an arrow
               function with a block body wherever it stands (`x = () => {`,
               a field, an argument of a top-level call).
  a scope      a class, interface, enum, record or namespace, an anonymous
               class's body (`new Runnable() {`), and, in TypeScript, a block
               of top-level code (`if (...) {`, a bare `{`): read inside.
  a literal    anything else: an array initializer, an object literal, a
               type literal (`function f(): { a: number } {`), a brace in an
               argument. Read inside as a scope (an object literal's methods
               are functions), and the declaration around it goes on after
               its `}`.

Everything inside a function (lambdas, arrow functions, anonymous and local
classes, object literals) is part of it and is not counted apart: a
200-line anonymous class inside a method makes that method long. A method of
an anonymous class or object literal outside any function is a function of
its own. Not read as functions: an arrow function or lambda whose body is
an expression rather than a block (`x => x + 1`), top-level statements of a
script (as Python's module-level code is not), an enum constant's body and a
record's compact constructor (both read as literals: the constant body's
methods are functions).

Blanked before braces are read: // and /* */ comments, string and
character literals, Java text blocks (\"\"\"...\"\"\"), TypeScript template
literals whole (their ${...} included) and regular expression literals (a /
where an operand may start, e.g. after `(`, `=`, `,` or `return`).

A method is named with the classes around it (RangeCache.refill); a lambda
or arrow function with the field or variable it is given to, else
(lambda) or (arrow).
"""
import re


class UnreadableFile(Exception):
    pass


def depth_zero(head):
    """head with every parenthesised group emptied: 'f(int a) const' ->
    'f() const'. None when a parenthesis is left open."""
    out, depth = [], 0
    for c in head:
        if c == "(":
            if depth == 0:
                out.append(c)
            depth += 1
        elif c == ")":
            depth -= 1
            if depth < 0:
                return None
            if depth == 0:
                out.append(c)
        elif depth == 0:
            out.append(c)
    return None if depth else "".join(out)


REGEX_AFTER_WORD = {"return", "typeof", "case", "do", "else", "in", "of",
                    "void", "yield", "await", "delete", "new", "instanceof",
                    "throw"}


class _Blanker:
    """Turns comments and literals of Java or TypeScript text into spaces
    (newlines kept, so offsets and line numbers stay)."""

    def __init__(self, text, typescript):
        self.text, self.ts = text, typescript
        self.out = list(text)

    def wipe(self, a, b):
        for k in range(a, b):
            if self.out[k] != "\n":
                self.out[k] = " "

    def wiped(self, a, b):
        self.wipe(a, b)
        return b

    def run(self):
        self.code(0, top=True)
        return "".join(self.out)

    def code(self, i, top=False):
        """Reads code from i; inside a template's ${...} (top False) stops
        after the } that closes it and returns its offset + 1."""
        text, n, depth = self.text, len(self.text), 0
        while i < n:
            c = text[i]
            if text.startswith("//", i):
                j = text.find("\n", i)
                i = self.wiped(i, n if j < 0 else j)
            elif text.startswith("/*", i):
                j = text.find("*/", i + 2)
                i = self.wiped(i, n if j < 0 else j + 2)
            elif not self.ts and text.startswith('"""', i):
                j = text.find('"""', i + 3)
                i = self.wiped(i, n if j < 0 else j + 3)
            elif c in "\"'":
                i = self.quoted(i, c)
                continue
            elif self.ts and c == "`":
                i = self.template(i)
                continue
            elif self.ts and c == "/" and self.regex_may_start(i):
                end = self.regex_end(i)
                if end is not None:
                    self.wipe(i, end)
                    i = end
                    continue
                i += 1
            elif not top and c == "{":
                depth += 1
                i += 1
            elif not top and c == "}":
                if depth == 0:
                    return i + 1
                depth -= 1
                i += 1
            else:
                i += 1
        return n

    def quoted(self, i, quote):
        j, n = i + 1, len(self.text)
        while j < n and self.text[j] != quote and self.text[j] != "\n":
            j += 2 if self.text[j] == "\\" else 1
        j = min(j + 1, n)
        self.wipe(i, j)
        return j

    def template(self, i):
        j, n = i + 1, len(self.text)
        while j < n and self.text[j] != "`":
            if self.text[j] == "\\":
                j += 2
            elif self.text.startswith("${", j):
                j = self.code(j + 2)
            else:
                j += 1
        j = min(j + 1, n)
        self.wipe(i, j)
        return j

    def regex_may_start(self, i):
        """Whether a / at i (not a comment) stands where an operand may."""
        j = i - 1
        while j >= 0 and self.out[j] in " \t\r\n":
            j -= 1
        if j < 0 or self.out[j] in "(,=:[!&|?{};+-*%<>~^":
            return True
        word = re.search(r"[\w$]+$", "".join(self.out[max(0, j - 12):j + 1]))
        return bool(word) and word.group() in REGEX_AFTER_WORD

    def regex_end(self, i):
        """Offset after the regular expression literal at i (its flags
        included), or None when none closes on its line."""
        j, n, in_class = i + 1, len(self.text), False
        while j < n and self.text[j] != "\n":
            c = self.text[j]
            if c == "\\":
                j += 2
                continue
            if c == "[":
                in_class = True
            elif c == "]":
                in_class = False
            elif c == "/" and not in_class:
                j += 1
                while j < n and (self.text[j].isalnum()):
                    j += 1
                return j
            j += 1
        return None


def blank(text, typescript):
    return _Blanker(text, typescript).run()


ANNOTATION = re.compile(r"@[\w.$]+(?:\s*\(\))?")
CONTROL = re.compile(r"(?:^|[^\w$.])(?:(?:if|for|while|switch|catch|with|"
                     r"synchronized)\s*\(\)|else|try|finally|do)$")
SCOPE_WORD = re.compile(
    r"(?:^|[^\w$.])(?:class|interface|enum|record|namespace|module)\b")
ANONYMOUS_CLASS = re.compile(r"\bnew\s+[\w.$]+\s*(?:<.*>)?\s*\(\)$")
JAVA_METHOD = re.compile(r"\(\)\s*(?:throws\s+[\w.$\s,<>?]+)?$")
TS_FUNCTION = re.compile(r"\(\)\s*(?::.*)?$")
TYPE_OR_VALUE_NEXT = ("=", ":", "|", "&", "<", ",", "(", "[", "?", "!",
                      "return", "default", "yield", "await", "in", "of")


def _classify(head, typescript):
    """'function', 'scope' or 'literal', for a { at a scope's level whose
    declaration so far is head."""
    h = " ".join(head.split())
    if h.endswith("=>" if typescript else "->"):
        return "function"
    flat = depth_zero(h)
    if flat is None:
        return "literal"  # a brace in an argument
    flat = ANNOTATION.sub(" ", flat).strip()
    if CONTROL.search(flat):
        return "scope" if typescript else "literal"
    if SCOPE_WORD.search(flat):
        return "scope"
    if ANONYMOUS_CLASS.search(flat):
        return "scope"
    if flat in ("", "static"):
        return "function" if (not typescript or flat) else "scope"
    if typescript:
        if flat.endswith(TYPE_OR_VALUE_NEXT):
            return "literal"
        return "function" if TS_FUNCTION.search(flat) else "literal"
    return "function" if JAVA_METHOD.search(flat) else "literal"


def _scope_name(head):
    m = re.search(r"\b(?:class|interface|enum|record|namespace)\s+([\w$]+)",
                  " ".join(head.split()))
    if m:
        return m.group(1)
    return "(anonymous)" if ANONYMOUS_CLASS.search(
        depth_zero(" ".join(head.split())) or "") else None


def _function_name(head, typescript):
    h = " ".join(head.split())
    arrow = "=>" if typescript else "->"
    if h.endswith(arrow):
        m = re.search(r"([\w$]+)\s*(?::[^=]*)?[=:]\s*(?:async\s*)?"
                      r"(?:<[^()]*>\s*)?(?:\([^()]*\)|[\w$]+)\s*(?::.*)?"
                      + re.escape(arrow) + "$", h)
        return m.group(1) if m else ("(arrow)" if typescript else "(lambda)")
    flat = ANNOTATION.sub(" ", depth_zero(h) or "").strip()
    if flat in ("", "static"):
        return "(static initializer)" if flat else "(initializer)"
    pattern = TS_FUNCTION if typescript else JAVA_METHOD
    for m in re.finditer(r"\(\)", flat):
        if pattern.match(flat, m.start()):
            name = re.search(r"([\w$]+|\[[^\]]*\])\s*(?:<[^()]*>)?\s*$",
                             flat[:m.start()])
            return name.group(1) if name else "(function)"
    return "(function)"


def functions(text, typescript):
    """(first line, name, lines) of every function in Java (typescript
    False) or TypeScript/JavaScript source text."""
    code = blank(text, typescript)
    found = []
    stack = []  # (kind, offset of the {, head, scope name or None)
    pieces, head_start = [], 0

    def line_of(offset):
        return code.count("\n", 0, offset) + 1

    for m in re.finditer(r"[{};]", code):
        i, c = m.start(), m.group()
        inside = stack[-1][0] if stack else "scope"
        if inside in ("function", "block"):
            if c == "{":
                stack.append(("block", i, "", None))
            elif c == "}":
                kind, start, head, _ = stack.pop()
                if kind == "function":
                    first = line_of(start)
                    owners = [s[3] for s in stack if s[3]]
                    name = ".".join(owners +
                                    [_function_name(head, typescript)])
                    found.append((first, name, line_of(i) - first + 1))
                    pieces, head_start = [], i + 1
            continue
        head = "".join(pieces) + code[head_start:i]
        if c == ";":
            pieces, head_start = [], i + 1
        elif c == "{":
            kind = _classify(head, typescript)
            stack.append((kind, i, head,
                          _scope_name(head) if kind == "scope" else None))
            pieces, head_start = [], i + 1
        else:
            if not stack:
                raise UnreadableFile(f"line {line_of(i)}: a }} closes nothing")
            kind, _, outer, _ = stack.pop()
            pieces = [outer + "{}"] if kind == "literal" else []
            head_start = i + 1
    if stack:
        raise UnreadableFile(
            f"line {line_of(stack[-1][1])}: a {{ is never closed")
    return found
