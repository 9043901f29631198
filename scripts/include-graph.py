#!/usr/bin/env python3
"""include-graph.py - check the include graph of src/ and include/.

    python3 scripts/include-graph.py [ROOT]

Reads every #include "..." line of ROOT/src and ROOT/include (ROOT: the
repository, by default this script's parent directory; system includes,
<...>, are not part of the graph) and fails, exit status 1, when

  - the graph has a cycle (printed: a.h -> b.h -> a.h).  The library's
    headers are layered (docs/design.md, "Headers and includes"): a header
    may include only headers below it, so that each can be read, and
    compiled, knowing only what is under it;
  - a source file of src/ includes internal.h, the umbrella header that
    exists for the tests only: a source includes the headers of what it
    uses, so that its includes say what it depends on;
  - a quoted include names no file (in the including file's directory,
    src/ or include/, the compiler's search order here).

Otherwise it prints the layer order, exit status 0: layer 0 is the files
that include none of the others, layer n those whose includes are all in
layers below n with at least one in layer n - 1.  Comments are skipped;
#if/#ifdef are not evaluated (every include counts, which can only add
edges).  It is the CTest test `include_graph`.
"""

import os
import re
import signal
import sys

INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)
COMMENT_RE = re.compile(r'/\*.*?\*/|//[^\n]*', re.S)
DIRS = ("src", "include")
UMBRELLA = "src/internal.h"


def strip_comments(text):
    # Keep the newlines of block comments so line numbers stay right.
    return COMMENT_RE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def read_graph(root):
    """{file: [(included file or None, name, line)]}, paths relative to root."""
    files = []
    for d in DIRS:
        top = os.path.join(root, d)
        for dirpath, _, names in os.walk(top):
            for n in names:
                if n.endswith((".c", ".h")):
                    files.append(os.path.relpath(os.path.join(dirpath, n), root))
    graph = {}
    for f in sorted(files):
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            text = strip_comments(fh.read())
        edges = []
        for m in INCLUDE_RE.finditer(text):
            name = m.group(1)
            line = text.count("\n", 0, m.start()) + 1
            target = None
            for d in [os.path.dirname(f)] + list(DIRS):
                cand = os.path.normpath(os.path.join(d, name))
                if os.path.isfile(os.path.join(root, cand)):
                    target = cand
                    break
            edges.append((target, name, line))
        graph[f] = edges
    return graph


def find_cycle(graph):
    """A cycle as a list of files (first == last), or None."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = {f: WHITE for f in graph}
    for start in sorted(graph):
        if colour[start] != WHITE:
            continue
        # Iterative depth-first search; `path` is the grey chain.
        path = [start]
        stack = [iter(sorted({t for t, _, _ in graph[start] if t}))]
        colour[start] = GREY
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                colour[path.pop()] = BLACK
                stack.pop()
                continue
            if colour.get(nxt, BLACK) == GREY:
                return path[path.index(nxt):] + [nxt]
            if colour.get(nxt, BLACK) == WHITE:
                colour[nxt] = GREY
                path.append(nxt)
                stack.append(iter(sorted({t for t, _, _ in graph[nxt] if t})))
    return None


def layers(graph):
    level = {}

    def depth(f):
        if f not in level:
            deps = {t for t, _, _ in graph[f] if t}
            level[f] = 1 + max((depth(t) for t in deps), default=-1)
        return level[f]

    sys.setrecursionlimit(max(1000, 4 * len(graph)))
    for f in graph:
        depth(f)
    out = {}
    for f, n in level.items():
        out.setdefault(n, []).append(f)
    return [sorted(out[n], key=lambda p: (not p.endswith(".h"), p)) for n in sorted(out)]


def main(argv):
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet when piped to head
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    root = os.path.abspath(root)
    graph = read_graph(root)
    if not graph:
        print("include-graph: no files under %s/{src,include}" % root, file=sys.stderr)
        return 1
    failed = False
    for f, edges in sorted(graph.items()):
        for target, name, line in edges:
            if target is None:
                print('include-graph: %s:%d: #include "%s" names no file' % (f, line, name))
                failed = True
            elif target == UMBRELLA and f.startswith("src/") and f.endswith(".c"):
                print("include-graph: %s:%d: includes %s, which is for the tests: include the "
                      "headers of what it uses" % (f, line, UMBRELLA))
                failed = True
    cycle = find_cycle(graph)
    if cycle:
        print("include-graph: cycle: " + " -> ".join(cycle))
        failed = True
    if failed:
        return 1
    nedges = sum(len({t for t, _, _ in e if t}) for e in graph.values())
    print("include graph of src/ and include/: %d files, %d includes, no cycle" % (len(graph), nedges))
    print("layer order (each file includes only files of the layers above it in this list):")
    for n, files in enumerate(layers(graph)):
        print("  %2d: %s" % (n, " ".join(os.path.basename(f) if f.startswith("src/") else f for f in files)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
