#!/usr/bin/python3
"""check_function_length.py must refuse a function over 100 lines (C++,
Python, Go, Java or TypeScript) and pass one of exactly 100, however the
code around it is written.

Each case writes a small tree into a temporary directory and runs the check
on it as ctest does. A function's lines run from its opening brace's line to
its closing brace's line, both counted, so body(98) below (a brace line, 98
lines, a brace line) is 100 lines.
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "testing"))
from check_fixture import run_on_tree  # noqa: E402

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       "check_function_length.py")
LIMIT = 100


def body(inner_lines, filler="  x += 1;\n"):
    """A function body of inner_lines lines between its brace lines."""
    return "{\n" + filler * inner_lines + "}\n"


def fn(head, inner_lines, filler="  x += 1;\n"):
    return head + " " + body(inner_lines, filler)


# Within the limit, however long what holds them: passes.
CLEAN = {
    "service/at_limit.cc": "namespace hilo {\n" +
                           fn("int AtLimit(int x)", LIMIT - 2) +
                           "}  // namespace hilo\n",
    # A class and a namespace far longer than a function may be.
    "service/long_class.h":
        "namespace hilo {\nnamespace internal {\n"
        "class ABSL_LOCKABLE Long final : public Base {\n public:\n" +
        "".join(fn(f"  int F{i}(int x) const override", 3)
                for i in range(40)) +
        "};\n}  // namespace internal\n}  // namespace hilo\n",
    # A long table is an initializer, not a function.
    "service/table.cc": "const int kTable[] = {\n" + "  1,\n" * 150 + "};\n",
    # Python: def line to last line, 100 of them; a long class is not a
    # function.
    "clients/python/hilo_client/at_limit.py":
        "class Cache:\n" + "".join(
            f"    def f{i}(self):\n        return 1\n" for i in range(60)) +
        "\n\ndef at_limit(x):\n" + "    x += 1\n" * (LIMIT - 1),
    # Go: braces in a raw string, a rune and a comment, and type literals in
    # the signature, do not count; a func type has no body.
    "clients/go/at_limit.go":
        "package hilo\n\ntype F func(int) error\n\n"
        "func (s *source) atLimit(x interface{}) map[int]struct{ a int } {\n"
        "\tr := `}}}`\n\tc := '}'\n\t// }\n" + "\tx++\n" * (LIMIT - 5) +
        "}\n",
    # Braces in comments, strings, raw strings, character literals and
    # preprocessor lines do not open or close anything.
    "client_cpp/src/braces.cc":
        '#define OPEN {\n'
        "int Braces(int x) {\n"
        "  // }}}\n"
        "  /* } */\n"
        '  const char* s = "}}\\"}";\n'
        "  const char* r = R\"json(}\"})json\";\n"
        "  char c = '}';\n"
        "  int big = 1'000'000;\n"
        "  return x;\n"
        "}\n" +
        fn("int After(int x)", 3),
    # Java: a method of 100 lines holding an anonymous class and a lambda;
    # braces in a text block, strings, characters, comments and an
    # annotation's array do not count; a long class and a long array
    # initializer are not functions.
    "clients/java/src/main/java/io/hilo/client/AtLimit.java":
        "package io.hilo.client;\n\n"
        "@SuppressWarnings({\"unchecked\", \"rawtypes\"})\n"
        "final class AtLimit implements Runnable {\n"
        "  private static final int[] TABLE = {\n" + "    1,\n" * 150 +
        "  };\n" +
        "".join(fn(f"  int f{i}(int x)", 3) for i in range(40)) +
        "  @Override\n  public void run() {\n"
        "    String s = \"}}\\\"}\";\n"
        "    char c = '}';\n"
        "    // }\n"
        "    String t = \"\"\"\n      }}}\n      \"\"\";\n"
        "    Runnable r = new Runnable() {\n"
        "      @Override\n      public void run() {}\n    };\n"
        "    Runnable l = () -> {\n      x += 1;\n    };\n" +
        "    x += 1;\n" * (LIMIT - 15) + "  }\n"
        "  interface Shape {\n    default int area() {\n      return 1;\n"
        "    }\n  }\n"
        "}\n",
    # TypeScript: a function of 100 lines with braces in a template (and in
    # its ${...}), a regular expression, strings and comments, and a type
    # literal in its signature; a long object literal of values is not a
    # function.
    "clients/node/src/at_limit.ts":
        "export interface Shape { area(): number; sides: { n: number } }\n"
        "type Pair = { a: number; b: { c: string } };\n"
        "const TABLE = {\n" + "  a: 1,\n" * 150 + "};\n"
        "export function atLimit(x: { n: number }): { n: number } {\n"
        "  const t = `}}${ {a: '}'}.a }}${`${'}'}`}`;\n"
        "  const r = /[{]}\\//g;\n"
        "  const s = '}' + \"}\";\n"
        "  // }\n  /* } */\n" + "  x.n += 1;\n" * (LIMIT - 8) +
        "  return x;\n}\n"
        "export class Cache {\n" +
        "".join(fn(f"  f{i}(x: number): number", 3) for i in range(40)) +
        "}\n",
}

# Each: one function of 101 lines the check must name (file, text, name,
# line of its opening brace), written so that something around it could
# hide it from a careless reader.
PLANTED = {
    "free_function": (
        "service/long.cc", fn("int Long(int x)", LIMIT - 1), "Long", 1),
    "in_namespace": (
        "service/long.cc",
        "namespace hilo {\nnamespace {\n" + fn("int Long(int x)", LIMIT - 1)
        + "}  // namespace\n}  // namespace hilo\n", "Long", 3),
    "method_in_class": (
        "client_cpp/src/long.h",
        "class Cache {\n public:\n" +
        fn("  void Long(int x) const ABSL_LOCKS_EXCLUDED(mu_)", LIMIT - 1) +
        "};\n", "Long", 3),
    "qualified_method": (
        "service/rpc/long.cc",
        fn("absl::Status Store::Long(int x) noexcept", LIMIT - 1),
        "Store::Long", 1),
    "constructor_with_braced_initializers": (
        "service/long.cc",
        fn("Store::Store(int x) : a_{x}, b_(std::vector<int>{1, 2}), c_{}",
           LIMIT - 1), "Store::Store", 1),
    "trailing_return": (
        "service/long.cc",
        fn("template <typename T>\nauto Long(T x) -> std::vector<T>",
           LIMIT - 1), "Long", 2),
    "lambdas_inside_count_toward_it": (
        "service/long.cc",
        "int Long(int x) {\n"
        "  auto f = [&](int y) {\n" + "    y += 1;\n" * 48 + "  };\n"
        "  auto g = [&] {\n" + "    x += 1;\n" * 46 + "  };\n"
        "  return f(x);\n}\n", "Long", 1),
    "braces_in_literals_do_not_end_it": (
        "service/long.cc",
        "int Long(int x) {\n"
        '  const char* s = "}";\n'
        "  // }\n"
        "  const char* r = R\"x(})x\";\n"
        "  char c = '}';\n" + "  x += 1;\n" * (LIMIT - 5) + "}\n", "Long", 1),
    "lambda_at_namespace_scope": (
        "service/long.cc",
        "const auto kLong = [] " + body(LIMIT - 1) + ";\n", "(lambda)", 1),
    "python_function": (
        "clients/python/hilo_client/long.py",
        "import os\n\n\ndef long(x):\n" + "    x += 1\n" * LIMIT, "long", 4),
    "python_method_with_nested_def": (
        "examples/python/long.py",
        "class Draw:\n    def run(self):\n        def inner():\n" +
        "            pass\n" * 50 + "        return 1\n" * 49 + "\n\n",
        "Draw.run", 2),
    "go_method": (
        "clients/go/long.go",
        "package hilo\n\nfunc (c *Client) Long(ctx context.Context) error " +
        body(LIMIT - 1, "\tgo func() {}()\n"), "Long", 3),
    "java_method": (
        "clients/java/src/main/java/io/hilo/client/Long.java",
        "package io.hilo.client;\n\nfinal class Cache {\n" +
        fn("  @Override\n  public <T> List<T> load(Map<String, List<T>> m)\n"
           "      throws IOException, InterruptedException", LIMIT - 1) +
        "}\n", "Cache.load", 6),
    "java_constructor_in_nested_class": (
        "examples/java/Long.java",
        "public class Outer {\n  static final class Inner {\n" +
        fn("    Inner(int x)", LIMIT - 1) + "  }\n}\n",
        "Outer.Inner.Inner", 3),
    "java_anonymous_class_and_lambda_inside_count_toward_it": (
        "clients/java/src/main/java/io/hilo/client/Long.java",
        "class Cache {\n  void refill() {\n"
        "    Runnable r = new Runnable() {\n      public void run() {\n" +
        "        x += 1;\n" * 47 + "      }\n    };\n"
        "    executor.submit(() -> {\n" + "      x += 1;\n" * 46 +
        "    });\n  }\n}\n", "Cache.refill", 2),
    "java_braces_in_literals_do_not_end_it": (
        "clients/java/src/main/java/io/hilo/client/Long.java",
        "class Cache {\n  void refill() {\n"
        "    String s = \"}\";\n    char c = '}';\n    // }\n"
        "    String t = \"\"\"\n      }\n      \"\"\";\n" +
        "    x += 1;\n" * (LIMIT - 7) + "  }\n}\n", "Cache.refill", 2),
    "java_lambda_given_to_a_field": (
        "clients/java/src/main/java/io/hilo/client/Long.java",
        "class Cache {\n  private final Runnable task = () -> " +
        body(LIMIT - 1) + ";\n}\n", "Cache.task", 2),
    "java_method_of_anonymous_class_in_a_field": (
        "clients/java/src/main/java/io/hilo/client/Long.java",
        "class Cache {\n  private final Runnable task = new Runnable() {\n" +
        fn("    @Override public void run()", LIMIT - 1) + "  };\n}\n",
        "Cache.(anonymous).run", 3),
    "java_static_initializer": (
        "clients/java/src/main/java/io/hilo/client/Long.java",
        "class Cache {\n  static " + body(LIMIT - 1) + "}\n",
        "Cache.(static initializer)", 2),
    "ts_function": (
        "clients/node/src/long.ts",
        "import { x } from './x.js';\n" +
        fn("export async function long(a: number): Promise<void>", LIMIT - 1),
        "long", 2),
    "ts_method_with_type_literals": (
        "clients/node/src/long.ts",
        "export class Cache {\n  private readonly n = 1;\n" +
        fn("  private async refill(a: { x: number }):\n"
           "      Promise<Map<string, { a: number }>>", LIMIT - 1) + "}\n",
        "Cache.refill", 4),
    "ts_return_type_literal": (
        "clients/node/src/long.ts",
        fn("function long(): { a: number }", LIMIT - 1), "long", 1),
    "ts_arrow_function_in_a_const": (
        "clients/node/src/long.ts",
        "export const long = async (x: number): Promise<void> => " +
        body(LIMIT - 1) + ";\n", "long", 1),
    "ts_arrow_function_in_a_field": (
        "clients/node/src/long.ts",
        "class Cache {\n  private readonly onData = (b: Buffer) => " +
        body(LIMIT - 1) + ";\n}\n", "Cache.onData", 2),
    "ts_getter": (
        "clients/node/src/long.ts",
        "class Cache {\n" + fn("  get size(): number", LIMIT - 1) + "}\n",
        "Cache.size", 2),
    "ts_method_of_object_literal": (
        "clients/node/src/long.ts",
        "const handlers = {\n  a: 1,\n  b: f(2),\n" +
        fn("  long(x: number)", LIMIT - 1) + "};\n", "long", 4),
    "ts_callback_of_top_level_call": (
        "clients/node/scripts/long.mjs",
        "process.on('exit', () => " + body(LIMIT - 1) + ");\n",
        "(arrow)", 1),
    "ts_arrows_and_class_inside_count_toward_it": (
        "clients/node/src/long.ts",
        "function long() {\n  const f = (y) => {\n" + "    y += 1;\n" * 47 +
        "  };\n  class Local {\n    m() {\n" + "      x += 1;\n" * 46 +
        "    }\n  }\n}\n", "long", 1),
    "ts_braces_in_templates_and_regexes_do_not_end_it": (
        "examples/node/long.ts",
        "function long(x) {\n"
        "  const t = `}${ '}' }${`}`}`;\n"
        "  const r = /}/;\n  const q = x / 2 / 1;\n"
        "  const s = '}' + \"}\";\n  // }\n" +
        "  x += 1;\n" * (LIMIT - 6) + "}\n", "long", 1),
    "header_in_examples": (
        "examples/cpp/long.h", fn("inline int Long(int x)", LIMIT - 1),
        "Long", 1),
}

# Long functions where the check must not look.
NOT_READ = {
    "tests/long_test.cc": fn("int Long(int x)", LIMIT + 50),
    "bench/long.cc": fn("int Long(int x)", LIMIT + 50),
    "fuzz/long.cc": fn("int Long(int x)", LIMIT + 50),
    "testing/long.h": fn("int Long(int x)", LIMIT + 50),
    "clients/conformance/tests/long.cc": fn("int Long(int x)", LIMIT + 50),
    "build/release/gen.cc": fn("int Long(int x)", LIMIT + 50),
    "out/CMakeCache.txt": "",
    "out/gen.pb.cc": fn("int Long(int x)", LIMIT + 50),
    "clients/python/tests/test_long.py":
        "def long():\n" + "    pass\n" * (LIMIT + 50),
    "clients/go/long_test.go":
        "package hilo\n\nfunc Long() " + body(LIMIT + 50),
    "clients/node/test/long.test.mjs": "function long() " + body(LIMIT + 50),
    "clients/node/src/long.test.ts": "function long() " + body(LIMIT + 50),
    "clients/node/bench/long.mjs": "function long() " + body(LIMIT + 50),
    "clients/java/src/test/java/io/hilo/client/Long.java":
        "class Long {\n  void f() " + body(LIMIT + 50) + "}\n",
    "clients/java/LongTest.java":
        "class LongTest {\n  void f() " + body(LIMIT + 50) + "}\n",
    "clients/java/bench/Long.java":
        "class Long {\n  void f() " + body(LIMIT + 50) + "}\n",
}


def check(files, *flags):
    return run_on_tree(CHECKER, files, *flags)


class CheckFunctionLengthTest(unittest.TestCase):

    def test_clean_tree_passes(self):
        result = check(CLEAN)
        self.assertEqual(result.returncode, 0, result.stdout)
        self.assertIn("188 functions in 8 files checked, none over 100 lines "
                      "unless allowed (the longest: clients/go/at_limit.go:5 "
                      "atLimit, 100)", result.stdout)

    def test_each_planted_long_function_fails(self):
        for name, (relpath, text, function, first) in PLANTED.items():
            with self.subTest(name):
                result = check({**CLEAN, relpath: text})
                self.assertEqual(result.returncode, 1, result.stdout)
                self.assertEqual(
                    result.stdout,
                    f"{relpath}:{first}: {function} is {LIMIT + 1} lines; a "
                    f"function has at most {LIMIT}: split it into its steps\n")

    def test_folders_outside_the_rule_are_not_read(self):
        result = check({**CLEAN, **NOT_READ})
        self.assertEqual(result.returncode, 0, result.stdout)
        self.assertIn("188 functions in 8 files checked", result.stdout)

    def test_empty_tree_fails(self):
        result = check({"service/empty.h": "#pragma once\n"})
        self.assertEqual(result.returncode, 1)
        self.assertIn("no function found", result.stderr)

    def test_unbalanced_java_and_typescript_fail_rather_than_pass(self):
        for relpath, text in (
                ("clients/java/Bad.java", "class Bad {\n  void f() {\n}\n"),
                ("clients/node/src/bad.ts", "function f() {\n}\n}\n")):
            with self.subTest(relpath):
                result = check({**CLEAN, relpath: text})
                self.assertEqual(result.returncode, 1, result.stdout)
                self.assertIn(relpath + ":line ", result.stdout)

    def test_unbalanced_braces_fail_rather_than_pass(self):
        result = check({**CLEAN, "service/ifdef.cc":
                        "#if A\nint F() {\n#else\nint F(int) {\n#endif\n"
                        "  return 0;\n}\n"})
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("service/ifdef.cc:line 2: a { is never closed",
                      result.stdout)

    def test_allowed_function_passes_until_it_grows(self):
        tree = {**CLEAN, "service/store/postgres/long.cc":
                fn("int Long(int x)", LIMIT + 10)}
        allow = "--allow=service/store/postgres/long.cc,Long,112"
        result = check(tree, allow)
        self.assertEqual(result.returncode, 0, result.stdout)
        self.assertIn("service/store/postgres/long.cc:1: Long is 112 lines, "
                      "allowed for now (at most 112)", result.stdout)
        result = check(tree, allow.replace("112", "111"))
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("Long is 112 lines, longer than the 111 it is allowed "
                      "for now", result.stdout)

    def test_allowance_for_a_function_no_longer_long_fails(self):
        result = check(CLEAN, "--allow=service/at_limit.cc,AtLimit,120")
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("service/at_limit.cc: AtLimit is allowed over 100 lines "
                      "but is not over them (or is gone): remove its --allow",
                      result.stdout)

    def test_limit_can_be_lowered(self):
        result = check(CLEAN, "--max_lines=99")
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertEqual(
            result.stdout,
            "clients/go/at_limit.go:5: atLimit is 100 lines; a function has "
            "at most 99: split it into its steps\n"
            "clients/java/src/main/java/io/hilo/client/AtLimit.java:358: "
            "AtLimit.run is 100 lines; a function has at most 99: split it "
            "into its steps\n"
            "clients/node/src/at_limit.ts:155: atLimit is 100 lines; a "
            "function has at most 99: split it into its steps\n"
            "clients/python/hilo_client/at_limit.py:124: at_limit is 100 "
            "lines; a function has at most 99: split it into its steps\n"
            "service/at_limit.cc:2: AtLimit is 100 lines; a function has at "
            "most 99: split it into its steps\n")

if __name__ == "__main__":
    unittest.main()
