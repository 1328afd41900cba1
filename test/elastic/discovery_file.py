"""A host discovery script for chorusrun's elastic tests: `cat` of a hosts file that the test
rewrites (atomically: the script never reads half a file)."""

import os


class DiscoveryFile:
    """DIR/hosts (the answer, "host:slots" lines) and DIR/discover.sh (the script)."""

    def __init__(self, directory, text):
        self.hosts = os.path.join(directory, 'hosts')
        self.script = os.path.join(directory, 'discover.sh')
        self.write(text)
        with open(self.script, 'w') as f:
            f.write(f'#!/bin/sh\ncat {self.hosts}\n')
        os.chmod(self.script, 0o755)

    def write(self, text):
        """Replaces the answer (any process may do it the same way: write, then rename)."""
        replace_file(self.hosts, text)


def replace_file(path, text):
    tmp = f'{path}.{os.getpid()}.tmp'
    with open(tmp, 'w') as f:
        f.write(text)
    os.replace(tmp, path)
