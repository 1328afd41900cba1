"""chorus.run: runs a Python function on every rank of a chorusrun job and returns what each
rank's call returned, as horovod.run does.

The function (with its arguments) is pickled with cloudpickle, so one defined in __main__ or a
closure travels too. This process serves it, and collects the results, over HTTP on an
ephemeral port (a random token guards both); each worker runs `python -m chorus.run_task`, which
fetches the function, calls it and sends back its return value under its rank. The job is the
`chorusrun` command this package installs (or CHORUS_RUN_CHORUSRUN), with the horovodrun flags
that the arguments below name. Its output streams through; a failed job raises RuntimeError with
chorusrun's own summary of the failure.
"""

import ipaddress
import os
import secrets
import shutil
import socket
import subprocess
import sys
import threading
import warnings

_TOKEN_HEADER = "X-Chorus-Run-Token"


class _Store:
    """The function's pickle and the results' pickles, by rank."""

    def __init__(self, payload, token):
        self.payload = payload
        self.token = token
        self.results = {}
        self.lock = threading.Lock()


def _handler(store):
    import http.server  # here, not at the top: `import chorus` stays light

    class Handler(http.server.BaseHTTPRequestHandler):
        def _authorized(self):
            if secrets.compare_digest(self.headers.get(_TOKEN_HEADER, ""), store.token):
                return True
            self.send_error(403)
            return False

        def do_GET(self):  # noqa: N802 (http.server's naming)
            if not self._authorized():
                return
            if self.path != "/func":
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(store.payload)))
            self.end_headers()
            self.wfile.write(store.payload)

        def do_PUT(self):  # noqa: N802
            if not self._authorized():
                return
            prefix = "/result/"
            if not self.path.startswith(prefix) or not self.path[len(prefix):].isdigit():
                self.send_error(404)
                return
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with store.lock:
                store.results[int(self.path[len(prefix):])] = body
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    return Handler


def _host_names(hosts, hostfile):
    if hosts:
        return [h.split(":")[0] for h in hosts.split(",") if h]
    if hostfile:
        with open(hostfile) as f:
            return [line.split()[0] for line in f if line.strip() and not line.startswith("#")]
    return []


def _is_local(name):
    try:
        address = ipaddress.ip_address(socket.gethostbyname(name))
    except (OSError, ValueError):
        return False
    if address.is_loopback:
        return True
    return name in (socket.gethostname(), socket.getfqdn())


def _server_address(host_names):
    """Where the workers reach this process: loopback when every host is this machine, else
    this machine's address on the route to the first remote host."""
    remote = [h for h in host_names if not _is_local(h)]
    if not remote:
        return "127.0.0.1"
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect((socket.gethostbyname(remote[0]), 9))  # no packet is sent
        return probe.getsockname()[0]
    finally:
        probe.close()


def _chorusrun():
    chosen = os.environ.get("CHORUS_RUN_CHORUSRUN")
    if chosen:
        return chosen
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "chorusrun")
    if os.access(here, os.X_OK):
        return here  # installed by pip: the package carries it
    found = shutil.which("chorusrun")
    if found:
        return found
    # The build tree: build/python/chorus next to build/launcher/chorusrun.
    tree = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "launcher", "chorusrun")
    if os.access(tree, os.X_OK):
        return tree
    raise RuntimeError("chorus.run: chorusrun not found (not in the chorus package, not on the "
                       "PATH, not in the build tree); set CHORUS_RUN_CHORUSRUN to its path")


def _launcher_args(num_proc, min_num_proc, max_num_proc, slots, reset_limit, cooldown_range,
                   hosts, hostfile, host_discovery_script, start_timeout, ssh_port,
                   ssh_identity_file, disable_cache, output_filename, verbose, use_gloo, use_mpi,
                   mpi_args, network_interfaces):
    """chorusrun's flags for horovod.run's arguments (the horovodrun flags they stand for)."""
    argv = ["-np", str(num_proc)]
    for flag, value in (("--min-np", min_num_proc), ("--max-np", max_num_proc),
                        ("--slots", slots), ("--reset-limit", reset_limit),
                        ("-H", hosts), ("--hostfile", hostfile),
                        ("--host-discovery-script", host_discovery_script),
                        ("--start-timeout", start_timeout), ("--ssh-port", ssh_port),
                        ("--ssh-identity-file", ssh_identity_file),
                        ("--output-filename", output_filename)):
        if value is not None:
            argv += [flag, str(value)]
    if cooldown_range is not None:
        low, high = cooldown_range
        argv += ["--blacklist-cooldown-range", str(low), str(high)]
    if network_interfaces:
        argv += ["--network-interfaces", ",".join(network_interfaces)]
    if mpi_args:
        argv += ["--mpi-args=" + mpi_args]
    if disable_cache:
        argv.append("--disable-cache")
    if verbose:
        argv.append("--verbose")
    if use_gloo:
        argv.append("--gloo")
    if use_mpi:
        argv.append("--mpi")
    return argv


def run(func, args=(), kwargs=None, num_proc=1, min_num_proc=None, max_num_proc=None,
        slots=None, reset_limit=None, cooldown_range=None, hosts=None, hostfile=None,
        host_discovery_script=None, start_timeout=None, ssh_port=None, ssh_identity_file=None,
        disable_cache=None, output_filename=None, verbose=None, use_gloo=None, use_mpi=None,
        mpi_args=None, network_interface=None, network_interfaces=None, executable=None,
        np=None, min_np=None, max_np=None):
    """Runs `func(*args, **kwargs)` on every rank of a chorusrun job (horovod.run's arguments,
    deprecated spellings included) and returns a list of each rank's return value, indexed by
    rank (the ranks of the last world, for an elastic job; only the first min_num_proc then).
    Raises RuntimeError when the job fails, with chorusrun's account of the failure."""
    if network_interface:
        network_interfaces = network_interface.split(",")
        warnings.warn("network_interface is deprecated, use network_interfaces instead",
                      DeprecationWarning)
    if np is not None:
        num_proc = np
        warnings.warn("np is deprecated, use num_proc instead", DeprecationWarning)
    if min_np is not None:
        min_num_proc = min_np
        warnings.warn("min_np is deprecated, use min_num_proc instead", DeprecationWarning)
    if max_np is not None:
        max_num_proc = max_np
        warnings.warn("max_np is deprecated, use max_num_proc instead", DeprecationWarning)
    if kwargs is None:
        kwargs = {}
    if hosts is not None and hostfile is not None:
        raise ValueError("Argument hosts and hostfile only allow one provided.")
    if use_gloo and use_mpi:
        raise ValueError("Argument use_gloo and use_mpi only allow one set True.")
    try:
        import cloudpickle
    except ImportError as e:
        raise ImportError("chorus.run needs cloudpickle to send the function to the workers "
                          "(Debian: apt-get install python3-cloudpickle)") from e

    def wrapped_func():
        return func(*args, **kwargs)

    import http.server
    store = _Store(cloudpickle.dumps(wrapped_func), secrets.token_hex(16))
    server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), _handler(store))
    server.daemon_threads = True
    serving = threading.Thread(target=server.serve_forever, name="chorus.run server",
                               daemon=True)
    serving.start()
    try:
        address = _server_address(_host_names(hosts, hostfile))
        command = ([_chorusrun()] +
                   _launcher_args(num_proc, min_num_proc, max_num_proc, slots, reset_limit,
                                  cooldown_range, hosts, hostfile, host_discovery_script,
                                  start_timeout, ssh_port, ssh_identity_file, disable_cache,
                                  output_filename, verbose, use_gloo, use_mpi, mpi_args,
                                  network_interfaces) +
                   [executable or sys.executable, "-m", "chorus.run_task", address,
                    str(server.server_address[1]), store.token])
        status, last_lines = _run_streaming(command)
    finally:
        server.shutdown()
        server.server_close()
    if status != 0:
        summary = "\n".join(last_lines) or "it printed nothing on stderr"
        raise RuntimeError("chorus.run: chorusrun exited with status %d:\n%s" % (status, summary))
    expected = min_num_proc if min_num_proc is not None else num_proc
    with store.lock:
        results = dict(store.results)
    missing = [r for r in range(expected) if r not in results]
    if missing:
        raise RuntimeError("chorus.run: the job succeeded but ranks %s sent no result"
                           % missing)
    return [cloudpickle.loads(results[r]) for r in range(expected)]


def _run_streaming(command):
    """Runs `command` with its stdout and stderr passed through; returns its status and the
    last lines of its stderr (chorusrun ends a failed job with its summary there)."""
    process = subprocess.Popen(command, stderr=subprocess.PIPE)
    last = []
    binary = getattr(sys.stderr, "buffer", None)  # None in a notebook's stream
    for raw in process.stderr:
        text = raw.decode(errors="replace")
        if binary is not None:
            binary.write(raw)
        else:
            sys.stderr.write(text)
        sys.stderr.flush()
        last.append(text.rstrip("\n"))
        del last[:-3]
    return process.wait(), [line for line in last if line.startswith("chorusrun")] or last
