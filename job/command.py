"""The `nsscaler` command as a CronJob's container runs it: one process, one run, an exit code.

Kept apart from `job.cli` (which tests call in-process) because what it does only makes sense for a
process that ends with the run:
- The cyclic garbage collector is off while the modules load. Loading pydantic, pydantic-settings,
  requests and pykube allocates objects that all live until the end, and collecting among them as they
  load is wasted work (about 30 ms of a steady-state run's ~0.3 s of imports, measured here). What is
  loaded is then frozen out of the collector's way, so the run's own collections never walk it again.
- Pydantic looks for plugins of other packages (the `pydantic` entry points) when it builds its first model:
  it reads the metadata of every installed distribution to find none. nsscaler uses no pydantic plugin, so
  the search is switched off (`PYDANTIC_DISABLE_PLUGINS`, unless the environment sets it already).
- A reader of the output that goes away (`nsscaler --output json | head`) ends the command with exit 1 and
  no traceback: the run itself is over by then, its statuses and Events written.
- The exit skips the interpreter's teardown. Once the output is flushed, freeing every module and object
  one by one only delays the exit (about 55 ms here) and changes nothing anyone can observe.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import sys
from typing import NoReturn


def main() -> NoReturn:
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    gc.disable()
    try:
        from job import cli  # noqa: PLC0415  (loaded with the collector off: the point of this module)
        from job.errors import EXIT_FAILED  # noqa: PLC0415
    finally:
        gc.freeze()
        gc.enable()
    try:
        code = cli.main()
    except BrokenPipeError:  # whoever read the output went away (`| head`): stop quietly, as other commands do
        code = EXIT_FAILED
    logging.shutdown()  # every handler flushed and closed
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a reader that went away: nothing left to say to it
            stream.flush()
    os._exit(code)
