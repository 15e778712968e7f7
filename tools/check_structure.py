#!/usr/bin/env python3
"""The house rules of the source tree (docs/architecture.md), checked from the files alone:

  rooms      every #include "dir/..." of a C++/CUDA file points one way: launch -> core,
             parallel, checkpoint, data, runtime -> kernels (core also uses parallel's
             Communicator), and inside launch/ a room includes only itself and the rooms below
             it (cli -> train -> eval -> run -> plan -> config; eval -> feed -> config;
             eval -> process -> plan; cli -> preflight -> run, process; cli -> supervise);
  cycles     inside every folder, its rooms point one way too: no chain of includes leaves a
             room and comes back to it. A folder without subfolders is one room; in a folder
             with subfolders (core/, kernels/, kernels/cuda/, ...) each subfolder is a room and
             each module at its root (NAME.h with NAME.cpp) stands alone, so the root may hold
             both what the rooms build on (core/param_store.h) and what is built from them
             (core/model.h); modules of one root may use each other;
  files      no file of the product is longer than MAX_FILE_LINES lines;
  functions  no function of the product (every folder of TOP) is longer than MAX_LINES lines,
             counted from its signature to its closing brace (declarative tables, listed in
             TABLES, aside).

  tools/check_structure.py [--functions] [--list N] [ROOT]

Exit status 1 with one line per violation. --list N prints every product function longer than
N lines, longest first, and checks nothing.
"""
import os
import re
import sys

MAX_LINES = 80
MAX_FILE_LINES = 600

# What each top-level folder may include (itself always).
TOP = {
    'kernels': set(),
    'runtime': {'kernels'},
    'parallel': set(),
    'core': {'kernels', 'parallel'},
    'data': set(),
    'checkpoint': set(),
    'launch': {'kernels', 'runtime', 'parallel', 'core', 'data', 'checkpoint'},
}
# launch/'s rooms and the rooms each may include (itself always), transitively closed below.
ROOMS = {
    'config': set(),
    'plan': {'config'},
    'run': {'plan'},
    'feed': {'config'},
    'process': {'plan'},
    'preflight': {'run', 'process'},
    'eval': {'run', 'feed', 'process'},
    'train': {'eval', 'run'},
    'supervise': set(),
    'cli': {'train', 'preflight', 'supervise'},
}
# Functions that are tables: one entry per line, long by nature.
TABLES = {
    ('launch/config/config_keys.cpp', 'build_keys'),
    ('launch/cli/help.cpp', 'commands'),
}
SOURCES = ('.h', '.cpp', '.cu', '.cuh')
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([^"]+)"', re.M)


def closure(rooms):
    out = {}
    for room in rooms:
        seen, todo = set(), list(rooms[room])
        while todo:
            r = todo.pop()
            if r not in seen:
                seen.add(r)
                todo.extend(rooms[r])
        out[room] = seen | {room}
    return out


def source_files(root, folder):
    for base, _, files in os.walk(os.path.join(root, folder)):
        for f in sorted(files):
            if f.endswith(SOURCES):
                yield os.path.relpath(os.path.join(base, f), root)


def check_rooms(root):
    problems = []
    rooms = closure(ROOMS)
    for top, allowed in TOP.items():
        for path in source_files(root, top):
            parts = path.split(os.sep)
            room = parts[1] if top == 'launch' and len(parts) > 2 else None
            if top == 'launch' and room not in ROOMS:
                problems.append(f'{path}: launch/ keeps its files in rooms ({", ".join(ROOMS)})')
                continue
            text = open(os.path.join(root, path), encoding='utf-8', errors='replace').read()
            for m in INCLUDE.finditer(text):
                target, rest = m.group(1), m.group(2)
                if target not in TOP or target == top and top != 'launch':
                    continue
                if target != top and target not in allowed:
                    problems.append(f'{path}: includes {target}/{rest} ({top}/ may use {sorted(allowed) or "nothing"})')
                elif target == 'launch':
                    to_room = rest.split('/')[0]
                    if to_room not in rooms[room]:
                        problems.append(f'{path}: includes launch/{rest} (launch/{room}/ may use '
                                        f'{", ".join(sorted(rooms[room] - {room})) or "no other room"})')
    return problems


def room_node(root, path):
    """The node of PATH in the include graph: its folder when that folder has no subfolders,
    otherwise its module (the path without extension) at that folder's root."""
    folder = os.path.dirname(path)
    full = os.path.join(root, folder)
    if any(os.path.isdir(os.path.join(full, entry)) for entry in os.listdir(full)):
        return os.path.splitext(path)[0]
    return folder


def include_graph(root):
    """node -> {node: (including file, included file)} over the product's own includes."""
    graph = {}
    for top in TOP:
        for path in source_files(root, top):
            text = open(os.path.join(root, path), encoding='utf-8', errors='replace').read()
            a = room_node(root, path)
            for m in INCLUDE.finditer(text):
                target = f'{m.group(1)}/{m.group(2)}'
                if m.group(1) not in TOP or not os.path.isfile(os.path.join(root, target)):
                    continue
                b = room_node(root, target)
                if b != a:
                    graph.setdefault(a, {}).setdefault(b, (path, target))
    return graph


def strongly_connected(graph):
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, {}))))]
        index[start] = low[start] = counter[0]; counter[0] += 1
        stack.append(start); on.add(start)
        while work:
            v, edges = work[-1]
            w = next(edges, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]; counter[0] += 1
                    stack.append(w); on.add(w)
                    work.append((w, iter(sorted(graph.get(w, {})))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop(); on.discard(w); component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def check_cycles(root):
    """Every cycle of includes that crosses rooms, with the includes that close it."""
    graph = include_graph(root)
    problems = []
    for component in strongly_connected(graph):
        rooms = {node if os.path.isdir(os.path.join(root, node)) else os.path.dirname(node)
                 for node in component}
        if len(rooms) < 2:
            continue  # modules of one folder's root using each other
        edges = [f'{src} -> {dst}' for a in component for b, (src, dst) in sorted(graph[a].items())
                 if b in component]
        problems.append(f'include cycle between rooms {", ".join(sorted(rooms))}: ' + '; '.join(edges))
    return problems


def check_file_lengths(root):
    problems = []
    for top in TOP:
        for path in source_files(root, top):
            with open(os.path.join(root, path), encoding='utf-8', errors='replace') as f:
                n = sum(1 for _ in f)
            if n > MAX_FILE_LINES:
                problems.append(f'{path}: {n} lines (at most {MAX_FILE_LINES}; split it by concern)')
    return problems


def strip(src):
    """The source with comments, string and character literals and preprocessor lines blanked
    (newlines kept, so line numbers hold)."""
    out, i, n = [], 0, len(src)
    while i < n:
        if src.startswith('//', i):
            j = src.find('\n', i)
            j = n if j < 0 else j
        elif src.startswith('/*', i):
            j = src.find('*/', i + 2)
            j = n if j < 0 else j + 2
        elif src.startswith('R"', i) and re.match(r'R"[^(\s]*\(', src[i:]):
            m = re.match(r'R"([^(\s]*)\(', src[i:])
            j = src.find(')' + m.group(1) + '"', i)
            j = n if j < 0 else j + len(m.group(1)) + 2
        elif src[i] in '"\'' and not (src[i] == "'" and i > 0 and src[i - 1].isalnum()):  # 1'000 digit separators
            j, quote = i + 1, src[i]
            while j < n and src[j] != quote and src[j] != '\n':
                j += 2 if src[j] == '\\' else 1
            j += 1
        elif src[i] == '#' and (i == 0 or src[i - 1] == '\n' or src[:i].rsplit('\n', 1)[-1].strip() == ''):
            j = i
            while True:
                k = src.find('\n', j)
                if k < 0 or src[k - 1] != '\\':
                    j = n if k < 0 else k
                    break
                j = k + 1
        else:
            out.append(src[i])
            i += 1
            continue
        out.append(re.sub(r'[^\n]', ' ', src[i:j]))
        i = j
    return ''.join(out)


def functions(path, text):
    """(lines, name, first line) of every function body at namespace or class scope."""
    src = strip(text)
    stack, start, found = [], 0, []
    for i, c in enumerate(src):
        if c == '{':
            head = src[start:i]
            if any(kind == 'f' for kind, _, _ in stack):
                kind = 'b'  # a block, lambda or initializer inside a function
            elif re.search(r'\bnamespace\b|\bextern\s*$', head):
                kind = 'n'
            elif re.search(r'\b(class|struct|enum|union)\b', head.split('(')[0]):
                kind = 'c'
            elif ')' in head:
                kind = 'f'
            else:
                kind = 'b'
            names = re.findall(r'((?:[~\w]+(?:<[^<>()]*>)?::)*~?\w+)\s*\(', head)
            first = start + len(head) - len(head.lstrip())
            stack.append((kind, first, names[0] if names else '?'))
            start = i + 1
        elif c == '}':
            if stack:
                kind, first, name = stack.pop()
                if kind == 'f':
                    l0, l1 = src.count('\n', 0, first) + 1, src.count('\n', 0, i) + 1
                    found.append((l1 - l0 + 1, name, l0))
            start = i + 1
        elif c == ';':
            start = i + 1
        elif c == ':' and stack and stack[-1][0] == 'c' and src[start:i].strip() in ('public', 'private', 'protected'):
            start = i + 1
    return found


def product_functions(root):
    out = []
    for top in TOP:
        for path in source_files(root, top):
            text = open(os.path.join(root, path), encoding='utf-8', errors='replace').read()
            out += [(n, name, path, line) for n, name, line in functions(path, text)]
    return sorted(out, key=lambda f: (-f[0], f[2], f[3]))


def check_functions(root):
    return [f'{path}:{line}: {name} is {n} lines (at most {MAX_LINES}; split it)'
            for n, name, path, line in product_functions(root)
            if n > MAX_LINES and (path, name.split('::')[-1]) not in TABLES]


def main(argv):
    threshold = int(argv[argv.index('--list') + 1]) if '--list' in argv else None
    args = [a for k, a in enumerate(argv) if not a.startswith('--') and (k == 0 or argv[k - 1] != '--list')]
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
    if threshold is not None:
        for n, name, path, line in product_functions(root):
            if n > threshold:
                print(f'{n:5d}  {path}:{line}  {name}')
        return 0
    problems = check_rooms(root) + check_cycles(root) + check_file_lengths(root)
    if '--functions' in argv:
        problems += check_functions(root)
    for p in problems:
        print(p)
    print(f'check_structure: {len(problems)} problem(s)', file=sys.stderr)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
