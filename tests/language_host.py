"""What Pulumi's Python language host does with an exception a program raises.

``pulumi-language-python-exec`` (pulumi/pulumi, sdk/python/cmd/pulumi-language-python-exec) runs the
program with ``pulumi.runtime.run_in_stack`` and then::

    except pulumi.RunError as e:
        pulumi.log.error(str(e))
    except Exception:
        pulumi.log.debug("Program failed with an unhandled exception:")
        pulumi.log.error(traceback.format_exc())

``language_host_log`` applies those two clauses to the exception the mock engine caught from the
same program, and returns the text the user would see under ``pulumi up``.
"""

from __future__ import annotations

import traceback

import pulumi


def language_host_log(error: BaseException) -> str:
    """The error text ``pulumi up`` shows for ``error`` raised by the program."""
    try:
        raise error
    except pulumi.RunError as e:
        return str(e)
    except Exception:
        return traceback.format_exc()
