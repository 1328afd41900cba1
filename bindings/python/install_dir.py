"""Prints where packages go relative to an install prefix for this interpreter.

Debian's default scheme (posix_local) adds "local/" itself ("/usr" + "local/lib/python3.11/
dist-packages"); relative to a prefix such as /usr/local that part is dropped.
"""
import sysconfig

scheme = sysconfig.get_default_scheme()
path = sysconfig.get_path("platlib", scheme, vars={"platbase": "/PREFIX", "base": "/PREFIX"})
path = path[len("/PREFIX/"):]
if scheme == "posix_local" and path.startswith("local/"):
    path = path[len("local/"):]
print(path)
