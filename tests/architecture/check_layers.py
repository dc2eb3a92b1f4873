#!/usr/bin/env python3
"""The layering of agent/src, read from the includes (docs/architecture.md).

Usage: check_layers.py LAYERS_TXT SOURCE_DIR            check the tree; exit 1 on a violation
       check_layers.py LAYERS_TXT SOURCE_DIR --planted  plant violations in a copy of the tree and
                                                        check each is caught; exit 1 if one is not

LAYERS_TXT is what kiwi_layers_table() (agent/cmake/layers.cmake) writes: a line per layer,
"<layer>: <layers it may include> | <external headers it owns>". Rules:
  1. A file of agent/src/<layer>/ includes headers of the layers it may include only (the build's
     include paths enforce this too; a path with ".." would get around them, so none has one).
  2. An external header a layer owns (<sqlite3.h>, <toml++/...>, <boost/dll/...>,
     <microhttpd.h>) reaches no file of another layer, directly or through the headers it
     includes: a header that includes one is that layer's private header.
  3. The SDK (agent/include/kiwi), the plugins (plugins/, handlers/, examples/) include no host
     header and no owned external header.
"""
import os
import re
import shutil
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
SOURCES = ('.c', '.h', '.cpp', '.hpp')


def read_layers(path):
    layers = {}
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            name, rest = line.split(':', 1)
            sees, owns = rest.split('|')
            layers[name.strip()] = (set(sees.split()), owns.split())
    return layers


def files_under(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ('node_modules', 'build'))
        for name in sorted(filenames):
            if name.endswith(SOURCES):
                yield os.path.join(dirpath, name)


def includes(path):
    with open(path, encoding='utf-8', errors='replace') as f:
        return INCLUDE.findall(f.read())


def owner_of(header, layers):
    for layer, (_, owns) in layers.items():
        for prefix in owns:
            if header == prefix or header.startswith(prefix):
                return layer
    return None


def check(layers, source_dir):
    """The violations in source_dir (the repository's root), as sentences."""
    src = os.path.join(source_dir, 'agent', 'src')
    problems = []
    rel = lambda p: os.path.relpath(p, source_dir)
    # Each host file's direct includes: host headers (resolved paths) and owned externals.
    host_includes = {}
    owned_includes = {}
    for path in files_under(src):
        layer = os.path.relpath(path, src).split(os.sep)[0]
        if layer not in layers:
            problems.append(f'{rel(path)}: in agent/src/{layer}/, which is not a layer '
                            '(declare it with kiwi_layer())')
            continue
        sees = layers[layer][0]
        host_includes[path] = []
        owned_includes[path] = []
        for kind, header in includes(path):
            if kind == '"':
                if '..' in header.split('/'):
                    problems.append(f'{rel(path)}: includes "{header}": no ".." in an include '
                                    '(name the layer: "store/store.hpp")')
                    continue
                top = header.split('/')[0]
                if top in layers:
                    if top not in sees:
                        problems.append(f'{rel(path)}: includes "{header}", but the {layer} layer '
                                        f'does not build on {top} (it may include: '
                                        f'{", ".join(sorted(sees))})')
                    target = os.path.join(src, header)
                    if os.path.exists(target):
                        host_includes[path].append(target)
            else:
                owner = owner_of(header, layers)
                if owner:
                    owned_includes[path].append((header, owner))

    # Rule 2: follow the host includes from each file; an owned external header found on the way
    # must belong to the file's own layer.
    for path in host_includes:
        layer = os.path.relpath(path, src).split(os.sep)[0]
        seen = {path}
        stack = [(path, [path])]
        reported = set()
        while stack:
            at, chain = stack.pop()
            for header, owner in owned_includes.get(at, []):
                if owner != layer and (header, at) not in reported:
                    reported.add((header, at))
                    via = ' -> '.join(rel(p) for p in chain)
                    problems.append(f'{rel(path)}: <{header}> is the {owner} layer\'s alone, but '
                                    f'the {layer} layer reaches it: {via} includes <{header}>')
            for nxt in host_includes.get(at, []):
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, chain + [nxt]))

    # Rule 3: the SDK and the plugins.
    for part in ('agent/include', 'plugins', 'handlers', 'examples'):
        for path in files_under(os.path.join(source_dir, part)):
            for kind, header in includes(path):
                top = header.split('/')[0]
                if kind == '"' and top in layers and not os.path.exists(
                        os.path.join(os.path.dirname(path), header)):
                    problems.append(f'{rel(path)}: includes the host header "{header}"; plugins '
                                    'and the SDK see the SDK only (<kiwi/...>)')
                owner = owner_of(header, layers) if kind == '<' else None
                if owner:
                    problems.append(f'{rel(path)}: includes <{header}>, the {owner} layer\'s alone')
    return problems


# Violations planted by --planted: (file, line to add, what the report must name).
PLANTED = [
    ('agent/src/http/router.cpp', '#include <sqlite3.h>',
     'agent/src/http/router.cpp: <sqlite3.h> is the store layer\'s alone'),
    ('agent/src/plugin/plugin_loader.hpp', '#include <toml++/toml.h>',
     'the http layer reaches it: agent/src/http/router.hpp -> agent/src/plugin/plugin_loader.hpp'),
    ('agent/src/store/store.cpp', '#include "http/router.hpp"',
     'agent/src/store/store.cpp: includes "http/router.hpp", but the store layer does not build on '
     'http'),
    ('agent/src/collect/collector.cpp', '#include "../http/router.hpp"',
     'agent/src/collect/collector.cpp: includes "../http/router.hpp": no ".."'),
    ('plugins/cpu/cpu_parse.cpp', '#include <microhttpd.h>',
     'plugins/cpu/cpu_parse.cpp: includes <microhttpd.h>, the http layer\'s alone'),
]


def planted(layers, source_dir):
    failures = []
    for file, line, expect in PLANTED:
        with tempfile.TemporaryDirectory() as tmp:
            for part in ('agent', 'plugins', 'handlers', 'examples'):
                shutil.copytree(os.path.join(source_dir, part), os.path.join(tmp, part),
                                ignore=shutil.ignore_patterns('node_modules', 'build'))
            target = os.path.join(tmp, file)
            with open(target) as f:
                text = f.read()
            # After the first line: a header's comment or #pragma once stays first.
            first, _, rest = text.partition('\n')
            with open(target, 'w') as f:
                f.write(first + '\n' + line + '\n' + rest)
            found = check(layers, tmp)
            if any(expect in p for p in found):
                print(f'caught: {line} in {file}')
            else:
                failures.append(f'NOT caught: {line} in {file} (expected a report containing '
                                f'"{expect}"; got: {found})')
    return failures


def main(argv):
    if len(argv) not in (3, 4) or (len(argv) == 4 and argv[3] != '--planted'):
        print(__doc__, file=sys.stderr)
        return 2
    layers = read_layers(argv[1])
    source_dir = os.path.abspath(argv[2])
    if len(argv) == 4:
        clean = check(layers, source_dir)
        if clean:
            print('the tree itself has violations; fix them first:', *clean, sep='\n  ')
            return 1
        failures = planted(layers, source_dir)
        for f in failures:
            print(f, file=sys.stderr)
        return 1 if failures else 0
    problems = check(layers, source_dir)
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print(f'layers: {len(layers)} layers, every include of agent/src, the SDK and the plugins '
              'keeps to them')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
