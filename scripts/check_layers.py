#!/usr/bin/env python3
"""Checks the layer rule of docs/architecture.md ("Layers"): every dependency points down.

    base <- ops <- runtime,  base <- timeline <- runtime,  proto <- runtime,
    base <- elastic (pure policies) <- launcher (chorusrun: processes, ssh, the job engine),
    proto <- launcher,  the public API <- bindings.

Reads every #include of the C/C++/CUDA sources in the layer folders and every CMake
target_link_libraries and ${PROJECT_SOURCE_DIR}/... path of their CMakeLists.txt, and prints one
line per upward (or sideways) reach. The runtime may include only ops' interface headers
(OPS_INTERFACE, listed in ops/README.md). bench/, test/ and examples/ sit on top and may use
anything.

Usage: check_layers.py [ROOT]     check the tree at ROOT (default: this script's repository)
       check_layers.py --self-test
Exit status: 0 when the tree follows the rule, 1 otherwise.
"""
import fnmatch
import os
import re
import sys
import tempfile

# Folder -> the other folders its code may use; None: anything. "api" is the public API, the
# headers of include/chorus/ reached as chorus/... (chorus.h, c_api.h, types.h); each belongs to
# the folder that implements it (PUBLIC_HEADER_OWNER), so that a folder may use one it could
# use anyway (types.h is base's vocabulary) and one that may use "api" may use them all. A
# folder may always use itself. elastic/ holds the pure policies of MPI-less jobs over plain
# types; launcher/ (chorusrun) applies them.
MAY_USE = {
    'base': set(),
    'proto': set(),
    'ops': {'base'},
    'timeline': {'base'},
    'include': set(),  # walked for its headers; each is judged as its owner's (folder_of)
    'runtime': {'base', 'proto', 'ops', 'timeline'},
    'elastic': {'base'},
    'launcher': {'base', 'proto', 'elastic'},
    'bindings': {'api'},
    'bench': None,
    'test': None,
    'examples': None,
}
PUBLIC_INCLUDE_DIRS = ('include',)
# The folder whose code implements a public header (the rest: runtime/, whose libchorus.so is
# the C ABI).
PUBLIC_HEADER_OWNER = {'include/chorus/types.h': 'base'}

# The ops headers the runtime may include (ops/README.md says why each is an interface).
OPS_INTERFACE = (
    'ops/collective_backend.h',
    'ops/gpu_platform.h',
    'ops/no_progress.h',
    'ops/cuda/batched_copy_plan.h',
    'ops/cpu/reduce_kernels.h',
    'ops/mpi/mpi_backend.h',
    'ops/mpi/mpi_datatypes.h',
    'ops/mpi/mpi_wait.h',
    'ops/hierarchical/hierarchy_layout.h',
    'ops/hierarchical/hierarchical_backend.h',
    'ops/ucx/tag_transport.h',
    'ops/ucx/tag_transport_view.h',
    'ops/ucx/ucx_transport.h',
    'ops/ucx/ucx_backend.h',
    'ops/ucx/algorithms/*.h',
)

SOURCE_SUFFIXES = ('.h', '.hpp', '.cc', '.cpp', '.c', '.cu', '.cuh')
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]', re.MULTILINE)
TARGET_RE = re.compile(r'\b(?:add_library|add_executable|pybind11_add_module)\s*\(\s*([A-Za-z0-9_]+)')
LINK_RE = re.compile(r'\btarget_link_libraries\s*\(([^)]*)\)', re.DOTALL)
PATH_RE = re.compile(r'\$\{(?:PROJECT_SOURCE_DIR|CMAKE_SOURCE_DIR)\}/([A-Za-z0-9_.-]+)')
# The shared library is the C ABI: using it is using the public API.
TARGET_LAYER_OVERRIDE = {'chorus': 'api'}


def layer_of(path):
    """The layer of a repository-relative path ("api" for a public header)."""
    if path.startswith(tuple(d + '/' for d in PUBLIC_INCLUDE_DIRS)):
        return 'api'
    return path.split('/', 1)[0]


def folder_of(path):
    """The folder a path belongs to (a public header: the folder that implements it)."""
    if layer_of(path) == 'api':
        return PUBLIC_HEADER_OWNER.get(path, 'runtime')
    return path.split('/', 1)[0]


def resolve(root, source, name):
    """The repository-relative path `#include name` in `source` reaches, or None (external)."""
    local = os.path.normpath(os.path.join(os.path.dirname(source), name))
    if os.path.isfile(os.path.join(root, local)):
        return local
    if os.path.isfile(os.path.join(root, name)):
        return name
    for d in PUBLIC_INCLUDE_DIRS:
        if os.path.isfile(os.path.join(root, d, name)):
            return d + '/' + name
    if folder_of(name) in MAY_USE:  # generated (proto/*.pb.h) or missing: judged by its folder
        return name
    return None


def allowed(user_path, used_path, include=True):
    """None if `user_path` may use `used_path` (an #include of it, else a CMake link or path),
    else why not."""
    if not include and used_path.rstrip('/') in PUBLIC_INCLUDE_DIRS:
        return None  # the folder of the public headers: each #include of one is judged alone
    user = folder_of(user_path)
    may = MAY_USE.get(user)
    if may is None:
        return None
    used_layer, used_folder = layer_of(used_path), folder_of(used_path)
    if layer_of(user_path) == 'api' and used_layer != 'api':
        return 'a public header may include only public headers (chorus/...)'
    if used_folder == user:
        return None
    if used_layer == 'api' and ('api' in may or used_folder in may):
        return None
    if used_folder not in may:
        rule = ', '.join(sorted(may)) if may else 'nothing else'
        return f'{user}/ may use {rule}'
    if include and user == 'runtime' and used_folder == 'ops' and not any(
            fnmatch.fnmatchcase(used_path, p) for p in OPS_INTERFACE):
        return 'the runtime may include only ops\' interface headers (ops/README.md)'
    return None


def walk(root, folder):
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
        dirnames.sort()
        for f in sorted(filenames):
            yield os.path.relpath(os.path.join(dirpath, f), root)


def check(root):
    problems = []
    cmake_files = []
    for folder in MAY_USE:
        for path in walk(root, folder):
            if path.endswith('CMakeLists.txt'):
                cmake_files.append(path)
            if not path.endswith(SOURCE_SUFFIXES):
                continue
            with open(os.path.join(root, path), encoding='utf-8', errors='replace') as f:
                text = f.read()
            for m in INCLUDE_RE.finditer(text):
                used = resolve(root, path, m.group(1))
                if used is None:
                    continue
                why = allowed(path, used)
                if why:
                    line = text.count('\n', 0, m.start()) + 1
                    problems.append(f'{path}:{line}: includes {m.group(1)}: {why}')

    # CMake: what each folder links and which source paths it names.
    texts = {}
    for p in cmake_files + ['CMakeLists.txt']:
        full = os.path.join(root, p)
        if os.path.isfile(full):
            with open(full, encoding='utf-8') as f:
                texts[p] = re.sub(r'#[^\n]*', '', f.read())  # drop comments
    target_path = {}  # target -> a path in its folder (its CMakeLists.txt)
    for p, text in texts.items():
        for m in TARGET_RE.finditer(text):
            target_path[m.group(1)] = p
    for p in cmake_files:
        text = texts[p]
        for m in LINK_RE.finditer(text):
            tokens = m.group(1).split()
            for token in tokens[1:]:
                if token not in target_path:
                    continue
                used = target_path[token]
                if token in TARGET_LAYER_OVERRIDE:
                    used = PUBLIC_INCLUDE_DIRS[-1] + '/' + token
                why = allowed(p, used, include=False)
                if why:
                    problems.append(f'{p}: links {token} ({folder_of(target_path[token])}/): {why}')
        for m in PATH_RE.finditer(text):
            why = allowed(p, m.group(1) + '/', include=False)
            if why:
                problems.append(f'{p}: names ${{PROJECT_SOURCE_DIR}}/{m.group(1)}: {why}')
    return problems


def self_test():
    """The check catches a planted upward reach of each kind, and passes a clean tree."""
    clean = {
        'include/chorus/types.h': '',
        'base/mutex.h': '#include "chorus/types.h"\n',
        'base/CMakeLists.txt': 'add_library(chorus_base STATIC x.cc)\n'
                               'target_include_directories(chorus_base PUBLIC '
                               '${PROJECT_SOURCE_DIR}/include)\n',
        'ops/collective_backend.h': '#include "base/mutex.h"\n#include <mpi.h>\n',
        'ops/cuda/cuda_platform.h': '#include "ops/gpu_platform.h"\n',
        'ops/CMakeLists.txt': 'add_library(chorus_ops STATIC x.cc)\n'
                              'target_link_libraries(chorus_ops PUBLIC chorus_base absl::status)\n',
        'timeline/timeline.h': '#include "base/mutex.h"\n',
        'include/chorus/chorus.h': '#include "chorus/types.h"\n',
        'runtime/execute/executor.cc': '#include "ops/collective_backend.h"\n#include "timeline/timeline.h"\n'
                               '#include "absl/status/status.h"\n',
        'runtime/CMakeLists.txt': 'add_library(chorus_core STATIC x.cc)\n'
                                  'add_library(chorus SHARED c_api.cc)\n'
                                  'target_link_libraries(chorus_core PUBLIC chorus_ops)\n',
        'bindings/python/src/module.cc': '#include "chorus/c_api.h"\n#include "dlpack.h"\n',
        'bindings/python/src/dlpack.h': '#include "chorus/types.h"\n',
        'bindings/python/CMakeLists.txt': 'target_link_libraries(ext PRIVATE chorus)\n',
        'elastic/next_generation.h': '#include "base/mutex.h"\n#include <vector>\n',
        'elastic/CMakeLists.txt': 'add_library(chorus_elastic STATIC next_generation.cc)\n'
                                  'target_link_libraries(chorus_elastic PUBLIC chorus_base)\n',
        'launcher/hosts/hosts.h': '#include "base/mutex.h"\n#include "elastic/next_generation.h"\n',
        'launcher/main.cc': '#include "launcher/hosts/hosts.h"\n',
        'launcher/CMakeLists.txt': 'add_library(chorus_launcher STATIC hosts.cc)\n'
                                   'add_executable(chorusrun main.cc)\n'
                                   'target_link_libraries(chorus_launcher PUBLIC chorus_base '
                                   'chorus_elastic)\n'
                                   'target_link_libraries(chorusrun PRIVATE chorus_launcher)\n',
        'test/unit/x_test.cc': '#include "runtime/execute/executor.cc"\n#include "ops/cuda/cuda_platform.h"\n',
    }
    planted = {
        'base/logging.h': ('#include "runtime/runtime.h"\n', 'base/logging.h:1'),
        'ops/mpi/mpi_backend.cc': ('#include <cstdint>\n#include "runtime/config.h"\n',
                                   'ops/mpi/mpi_backend.cc:2'),
        'ops/ucx/x.cc': ('#include "timeline/timeline.h"\n', 'ops/ucx/x.cc:1'),
        'timeline/trace.h': ('#include "runtime/message.h"\n', 'timeline/trace.h:1'),
        'timeline/t.cc': ('#include "ops/collective_backend.h"\n', 'timeline/t.cc:1'),
        'runtime/gpu.cc': ('#include "ops/cuda/cuda_platform.h"\n', 'runtime/gpu.cc:1'),
        'include/chorus/c_api.h': ('#include "base/mutex.h"\n', 'include/chorus/c_api.h:1'),
        'base/types.cc': ('#include "chorus/chorus.h"\n', 'base/types.cc:1'),
        'launcher/main.cc': ('#include "chorus/chorus.h"\n', 'launcher/main.cc:1'),
        'elastic/blacklist.cc': ('#include "runtime/runtime.h"\n', 'elastic/blacklist.cc:1'),
        'elastic/host_set.h': ('#include "launcher/hosts/hosts.h"\n', 'elastic/host_set.h:1'),
        'elastic/x/CMakeLists.txt': ('target_link_libraries(chorus_elastic PUBLIC '
                                     'chorus_launcher)\n',
                                     'elastic/x/CMakeLists.txt: links chorus_launcher'),
        'bindings/python/src/fast.h': ('#include "runtime/runtime.h"\n',
                                       'bindings/python/src/fast.h:1'),
        'ops/cuda/CMakeLists.txt': ('target_link_libraries(chorus_cuda PUBLIC chorus_core)\n',
                                    'ops/cuda/CMakeLists.txt: links chorus_core'),
        'timeline/CMakeLists.txt': ('add_library(chorus_timeline STATIC x.cc)\n'
                                    'target_include_directories(chorus_timeline PUBLIC '
                                    '${PROJECT_SOURCE_DIR}/runtime/include)\n',
                                    'timeline/CMakeLists.txt: names ${PROJECT_SOURCE_DIR}/runtime'),
    }

    def make(files):
        tmp = tempfile.TemporaryDirectory(prefix='chorus_layers_')
        for path, text in files.items():
            full = os.path.join(tmp.name, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, 'w', encoding='utf-8') as f:
                f.write(text)
        return tmp

    failures = []
    with make(clean) as root:
        problems = check(root)
        if problems:
            failures.append('a clean tree was flagged:\n  ' + '\n  '.join(problems))
    for path, (text, expected) in planted.items():
        files = dict(clean)
        files[path] = text
        with make(files) as root:
            problems = check(root)
        if not any(p.startswith(expected) for p in problems):
            failures.append(f'planted {path} ({text.strip()!r}) was not caught; got {problems}')
        elif len(problems) != 1:
            failures.append(f'planted {path}: expected one problem, got {problems}')
    for f in failures:
        print('check_layers self-test: ' + f)
    if not failures:
        print(f'check_layers self-test: PASS ({len(planted)} planted reaches caught)')
    return 1 if failures else 0


def main(argv):
    if argv[1:] == ['--self-test']:
        return self_test()
    root = argv[1] if len(argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f'check_layers: {len(problems)} reach(es) against the layer rule '
              '(docs/architecture.md, Layers)')
        return 1
    print('check_layers: every include and link points down the layers')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
