"""The mock-engine harness the tests use. It lives in ``components.offline`` (the render command
runs the same engine) and is re-exported here under the names the tests import."""

from components.offline import *  # noqa: F403
from components.offline import __all__  # noqa: F401
