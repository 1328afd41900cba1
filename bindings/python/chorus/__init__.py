"""chorus: collective communication for data-parallel training.

The framework frontends live in subpackages (``chorus.torch`` mirrors ``horovod.torch``).
The extension ``chorus._C`` is the only code that talks to libchorus.so.
"""

from chorus._C import ChorusError, ChorusValueError
from chorus.runner import run

__version__ = "0.1.0"

__all__ = ["ChorusError", "ChorusValueError", "run", "__version__"]
