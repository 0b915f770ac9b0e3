#!/usr/bin/env python3
"""The object files of one static library do not depend on each other in a
circle: a.o using a function b.o defines while b.o uses one a.o defines is
two files that are one (issue 36: pg_migrate.c and pg_repeatables.c, whose
shared part now lives in pg_files.c). Reads `nm -A -P LIBRARY`; prints each
circle (a strongly connected set of objects) and exits 1 when there is one.

    unit_cycles.py NM LIBRARY
"""
import collections
import subprocess
import sys


def graph(nm, library):
    out = subprocess.run([nm, "-A", "-P", library], check=True, capture_output=True,
                         text=True).stdout
    defined, used = {}, collections.defaultdict(set)
    for line in out.splitlines():
        # POSIX format: "lib.a[obj.o]: name TYPE [value size]"
        head, sep, rest = line.partition("]: ")
        if not sep:
            continue
        obj = head.rsplit("[", 1)[-1]
        fields = rest.split()
        if len(fields) < 2:
            continue
        if fields[1] in ("T", "D", "B", "R", "V", "W"):
            defined[fields[0]] = obj
        elif fields[1] == "U":
            used[obj].add(fields[0])
    edges = collections.defaultdict(set)
    for obj, names in used.items():
        for name in names:
            if name in defined and defined[name] != obj:
                edges[obj].add(defined[name])
    return edges


def circles(edges):
    """Tarjan's strongly connected components of more than one object."""
    index, low, stack, on, found, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(set(edges) | {w for ws in edges.values() for w in ws}):
        if v not in index:
            visit(v)
    return found


def main():
    nm, library = sys.argv[1], sys.argv[2]
    edges = graph(nm, library)
    found = circles(edges)
    for part in found:
        print("objects that use each other in a circle: " + " <-> ".join(part))
    if not found:
        print(f"{library}: {len(edges)} objects use others, none in a circle")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
