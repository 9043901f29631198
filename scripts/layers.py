#!/usr/bin/env python3
"""layers.py - check that calls only go down a program's layers.

    python3 scripts/layers.py [--max-allowed=N] DIR OBJECTS...
                                                check the sources of DIR
    python3 scripts/layers.py --self-test      show that the check catches
                                                an upward call

DIR/layers.txt lists the layers of DIR, lowest first: each is a folder of
DIR (src/: lib, io, mem, ...) or a single source file of DIR (pcfs/:
log.c, fds.c, ...).  A source may use the symbols of its own layer and of
the layers listed before it.  The check reads the symbols that the object
files define and use (nm; OBJECTS are archives or object files, each
object named NAME.c.o after its source) and fails on every use of a
symbol defined in a later layer, unless DIR/layers.allow names it:

    PATH SYMBOL   why it stays, for now      (PATH: FOLDER/FILE.c or FILE.c)

An entry that no longer matches an upward use fails the check too, and so
does a list longer than --max-allowed (the build gives the number it has
now): the list can only shrink.  Sources must not include api/internal.h, the
library tests' umbrella header, either.  Exit status: 0 clean, 1
violations, 2 bad usage or input.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

DEFINED = set("TDBRVWGC")  # text, data, bss, read-only, weak, small data, common
USED = set("Uwv")  # undefined, weak undefined


def fail_usage(msg):
    print("layers.py: " + msg, file=sys.stderr)
    sys.exit(2)


def read_layers(src):
    path = os.path.join(src, "layers.txt")
    try:
        with open(path) as f:
            names = [l.split("#")[0].strip() for l in f]
    except OSError as e:
        fail_usage("%s: %s" % (path, e.strerror))
    layers = [n for n in names if n]
    for n in layers:
        isfile = n.endswith(".c")
        if not (os.path.isfile if isfile else os.path.isdir)(os.path.join(src, n)):
            fail_usage("%s names %s, which is not a %s of %s" % (path, n, "file" if isfile else "folder", src))
    return layers


def source_layers(src, layers):
    """NAME.c -> (layer, path under src) for every source (names are unique)."""
    where = {}
    for layer in layers:
        if layer.endswith(".c"):
            names, prefix = [layer], ""
        else:
            names = sorted(n for n in os.listdir(os.path.join(src, layer)) if n.endswith(".c"))
            prefix = layer + "/"
        for name in names:
            if name in where:
                fail_usage("%s is in both %s and %s" % (name, where[name][0], layer))
            where[name] = (layer, prefix + name)
    stray = [n for n in os.listdir(src) if n.endswith(".c") and n not in where]
    if stray:
        fail_usage("sources in no layer of %s/layers.txt: %s" % (src, " ".join(sorted(stray))))
    return where


def read_allow(src):
    """{(FOLDER/FILE.c, SYMBOL): line number}"""
    path = os.path.join(src, "layers.allow")
    allow = {}
    if not os.path.exists(path):
        return allow
    with open(path) as f:
        for no, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 2)
            if len(parts) < 3:
                fail_usage("%s:%d: want 'FOLDER/FILE.c SYMBOL reason'" % (path, no))
            allow[(parts[0], parts[1])] = no
    return allow


def member_symbols(paths):
    """{object name: (defined set, used set)} from nm's listing."""
    members = {}
    for path in paths:
        try:
            out = subprocess.run(["nm", "-A", path], capture_output=True, text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError) as e:
            fail_usage("nm %s: %s" % (path, e))
        # nm -A prefixes each line with the path (which may hold spaces)
        # and, in an archive, the member: "PATH:name.c.o:ADDR T sym",
        # "PATH:name.c.o:    U sym"; "PATH:ADDR T sym" for an object.
        prefix = path + ":"
        for line in out.splitlines():
            if not line.startswith(prefix):
                continue
            rest = line[len(prefix):]
            m = re.match(r"^([^:\s]+\.o):(.*)$", rest)
            member, rest = (m.group(1), m.group(2)) if m else (os.path.basename(path), rest)
            tokens = rest.split()
            if len(tokens) < 2:
                continue
            kind, sym = tokens[-2], tokens[-1]
            cur = members.setdefault(member, (set(), set()))
            if kind in USED:
                cur[1].add(sym)
            elif kind in DEFINED:
                cur[0].add(sym)
    if not members or not any(d for d, _ in members.values()):
        fail_usage("no symbols read from " + " ".join(paths) + ": nothing would be checked")
    return members


def upward_uses(members, where, rank):
    """[(user path, symbol, definer path, definer layer, user layer)] going up."""
    owner = {}
    for member, (defined, _) in members.items():
        for sym in defined:
            owner[sym] = member
    layer, path = {}, {}
    for member in members:
        name = member[:-2] if member.endswith(".o") else member  # NAME.c.o -> NAME.c
        if name not in where:
            fail_usage("object %s has no source in a layer" % member)
        layer[member], path[member] = where[name]
    found = []
    for member, (_, used) in sorted(members.items()):
        for sym in sorted(used):
            to = owner.get(sym)
            if to and rank[layer[to]] > rank[layer[member]]:
                found.append((path[member], sym, path[to], layer[to], layer[member]))
    return found


def includes_internal(src, where):
    bad = []
    for _, rel in sorted(where.values()):
        with open(os.path.join(src, rel)) as f:
            if re.search(r'^\s*#\s*include\s*"(api/)?internal\.h"', f.read(), re.M):
                bad.append(rel)
    return bad


def check(src, objects, out=sys.stdout, max_allowed=None):
    layers = read_layers(src)
    rank = {l: i for i, l in enumerate(layers)}
    where = source_layers(src, layers)
    allow = read_allow(src)
    ups = upward_uses(member_symbols(objects), where, rank)
    errors = 0
    seen = set()
    for user, sym, to, to_layer, user_layer in ups:
        seen.add((user, sym))
        if (user, sym) in allow:
            continue
        print("upward: %s uses %s, defined in %s (a later layer: %s after %s)" %
              (user, sym, to, to_layer, user_layer), file=out)
        errors += 1
    for (user, sym), no in sorted(allow.items(), key=lambda kv: kv[1]):
        if (user, sym) not in seen:
            print("stale: %s/layers.allow:%d: %s no longer uses %s upward; remove the line" %
                  (src, no, user, sym), file=out)
            errors += 1
    for f in includes_internal(src, where):
        print("include: %s/%s includes api/internal.h (the tests' header)" % (src, f), file=out)
        errors += 1
    if max_allowed is not None and len(allow) > max_allowed:
        print("grown: %s/layers.allow has %d entries, more than the %d the build allows: the list "
              "may only shrink (move the call down instead)" % (src, len(allow), max_allowed), file=out)
        errors += 1
    allowed = sum(1 for u in ups if (u[0], u[1]) in allow)
    print("layers of %s: %s; %d upward uses, %d allowed, %d errors" %
          (src, " < ".join(layers), len(ups), allowed, errors), file=out)
    return 1 if errors else 0


SELF_TEST_FILES = {
    "src/layers.txt": "low\nhigh\n",
    "src/low/a.c": "int high_thing(void);\nint low_thing(void) { return 1; }\n"
                   "int low_calls_up(void) { return high_thing(); }\n",
    "src/high/b.c": "int low_thing(void);\nint high_thing(void) { return low_thing() + 1; }\n",
}


def self_test():
    """An upward call fails the check; allowed, it passes; the allowance
    left behind once the call is gone fails again (stale)."""
    cc = os.environ.get("CC", "cc")
    tmp = tempfile.mkdtemp(prefix="layers self-test.")  # a space: nm -A paths
    try:
        for rel, text in SELF_TEST_FILES.items():
            p = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as f:
                f.write(text)

        def build():
            objs = []
            for rel in ("src/low/a.c", "src/high/b.c"):
                obj = os.path.join(tmp, os.path.basename(rel) + ".o")
                subprocess.run([cc, "-c", "-o", obj, os.path.join(tmp, rel)], check=True)
                objs.append(obj)
            lib = os.path.join(tmp, "lib.a")
            if os.path.exists(lib):
                os.unlink(lib)
            subprocess.run(["ar", "rc", lib] + objs, check=True)
            return lib

        null = open(os.devnull, "w")
        ok = True
        lib = build()
        src = os.path.join(tmp, "src")
        if check(src, [lib], null) != 1:
            print("self-test: an upward call (low/a.c -> high_thing) was not caught")
            ok = False
        with open(os.path.join(tmp, "src/layers.allow"), "w") as f:
            f.write("low/a.c high_thing  the self-test allows it\n")
        if check(src, [lib], null) != 0:
            print("self-test: an allowed upward call failed the check")
            ok = False
        if check(src, [lib], null, max_allowed=0) != 1:
            print("self-test: an allowance past --max-allowed was not caught")
            ok = False
        with open(os.path.join(tmp, "src/low/a.c"), "w") as f:
            f.write("int low_thing(void) { return 1; }\n")
        lib = build()
        if check(src, [lib], null) != 1:
            print("self-test: a stale allowance was not caught")
            ok = False
        print("self-test: %s" % ("upward call, allowance, grown list and stale allowance all behave" if ok else "FAILED"))
        return 0 if ok else 1
    except (OSError, subprocess.CalledProcessError) as e:
        print("self-test: could not build its objects: %s" % e)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    max_allowed = None
    if len(argv) > 1 and argv[1].startswith("--max-allowed="):
        try:
            max_allowed = int(argv[1].split("=", 1)[1])
        except ValueError:
            fail_usage("--max-allowed=N takes a number")
        argv = argv[:1] + argv[2:]
    if len(argv) < 3:
        fail_usage("usage: layers.py [--max-allowed=N] DIR OBJECTS... | --self-test")
    return check(argv[1], argv[2:], max_allowed=max_allowed)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
