"""The worker side of chorus.run: `python -m chorus.run_task ADDRESS PORT TOKEN` fetches the
function from the launching process, calls it, and sends back its return value under this
worker's rank (chorus's rank when the function left chorus initialized, else the rank its
launcher gave it)."""

import http.client
import os
import sys

from chorus.runner import _TOKEN_HEADER


def _request(address, port, token, method, path, body=None):
    connection = http.client.HTTPConnection(address, port, timeout=600)
    try:
        connection.request(method, path, body=body, headers={_TOKEN_HEADER: token})
        response = connection.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError("chorus.run_task: %s %s on %s:%d: HTTP %d"
                               % (method, path, address, port, response.status))
        return data
    finally:
        connection.close()


def _rank():
    from chorus import basics
    if basics.is_initialized():
        return basics.rank()
    for name in ("CHORUS_RANK", "HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        if name in os.environ:
            return int(os.environ[name])
    raise RuntimeError("chorus.run_task: no rank: chorus is not initialized and none of "
                       "CHORUS_RANK, HOROVOD_RANK, OMPI_COMM_WORLD_RANK, PMI_RANK is set")


def main(address, port, token):
    import cloudpickle
    func = cloudpickle.loads(_request(address, port, token, "GET", "/func"))
    try:
        value = func()
    except BaseException as e:
        sys.stderr.write("User function raise error: {error}\n".format(error=str(e)))
        raise
    _request(address, port, token, "PUT", "/result/%d" % _rank(), cloudpickle.dumps(value))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: python -m chorus.run_task ADDRESS PORT TOKEN")
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
