#!/usr/bin/env python3
"""Lists C++ functions and files over ppstage's size limits (../shared/STYLE.md).

    scripts/check_sizes.py [--function-lines 60] [--file-lines 600] [DIR ...]

Defaults to src/ and schedules/. Exits 1 when anything is over a limit, printing
`path:line: name is N lines` for each. Function bodies are found by matching braces
outside comments and strings: a block opened at namespace or class level whose header
holds a parameter list (and no `=`) is a function; lambdas and nested blocks count
towards the function around them.
"""
import argparse
import pathlib
import re
import sys

SCOPE = re.compile(r"\b(namespace|class|struct|union|enum)\b[^()]*$|extern\s+\"C\"\s*$")


def strip(text):
    """Blanks comments and string/char literals, keeping line breaks."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(text):
    """Yields (first line, line count, header) for every function body in `text`."""
    code = strip(text)
    stack = []  # per open brace: ("scope" | "function" | "block", start line, header)
    header_start = 0
    line = 1
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c in ";}" or (c == "{"):
            if c == "{":
                header = code[header_start:i]
                inside_function = any(kind == "function" for kind, _, _ in stack)
                flat = " ".join(header.split())
                if inside_function:
                    kind = "block"
                elif SCOPE.search(flat) or not flat:
                    kind = "scope"
                elif "(" in flat and not re.search(r"=\s*$|=\s*[^=(]*$", flat.split("(")[0]):
                    kind = "function"
                else:
                    kind = "block"
                stack.append((kind, line - header.count("\n", header.rfind("\n") + 1), flat))
            elif c == "}" and stack:
                kind, start, flat = stack.pop()
                if kind == "function":
                    yield start, line - start + 1, flat
            header_start = i + 1
        elif c == ":" and code[i - 1 : i + 1] != "::" and code[i : i + 2] != "::":
            # `public:` and friends end a header too.
            if re.search(r"\b(public|private|protected)\s*$", code[header_start:i]):
                header_start = i + 1


def name_of(header):
    before = header.split("(")[0].split()
    return before[-1] if before else header[:40]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--function-lines", type=int, default=60)
    parser.add_argument("--file-lines", type=int, default=600)
    parser.add_argument("--list", action="store_true", help="print every function's size")
    parser.add_argument("dirs", nargs="*", default=["src", "schedules"])
    args = parser.parse_args()
    over = 0
    for d in args.dirs:
        for path in sorted(pathlib.Path(d).rglob("*")):
            if path.suffix not in (".cpp", ".h", ".hpp"):
                continue
            text = path.read_text(errors="replace")
            lines = text.count("\n")
            if lines > args.file_lines:
                print(f"{path}: file is {lines} lines (limit {args.file_lines})")
                over += 1
            for start, count, header in functions(text):
                if args.list:
                    print(f"{count:5d} {path}:{start} {name_of(header)}")
                if count > args.function_lines:
                    print(f"{path}:{start}: {name_of(header)} is {count} lines "
                          f"(limit {args.function_lines})")
                    over += 1
    return 1 if over and not args.list else 0


if __name__ == "__main__":
    sys.exit(main())
