"""What the launcher's end-to-end scripts (chorusrun_e2e.py, ucx_launch_e2e.py) share: one
PASS/FAIL line per case, the list of failed cases, and how a finished process is described."""

FAILURES = []


def check(name, ok, detail=''):
    print(('PASS ' if ok else 'FAIL ') + name + ('' if ok else ': ' + detail))
    if not ok:
        FAILURES.append(name)


def describe(p):
    return f'rc={p.returncode}\n--- stdout\n{p.stdout}\n--- stderr\n{p.stderr}'


def summary():
    """Prints the tally; returns the exit status (1 when a case failed)."""
    print(f'{len(FAILURES)} failed' if FAILURES else 'all passed')
    return 1 if FAILURES else 0
