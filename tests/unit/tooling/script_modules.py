"""The project's scripts (``scripts/*.py``, not a package) as modules a test can call, loaded from their files.

Who calls: the tests of ``tests/unit/tooling`` that check a script's functions (the architecture page, the
reference pages, the settings reads). Loading runs the script's top level, not its ``main()``; the module is
registered in ``sys.modules`` under the script's name (a dataclass of the script looks its module up there).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parents[3] / "scripts"


def load_script(name: str) -> ModuleType:
    """``scripts/{name}.py`` loaded afresh as the module ``name``."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
