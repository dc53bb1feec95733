"""Suite-wide test settings.

Hypothesis: no per-example deadline (this project's machines are shared 2-core boxes and a
deadline would turn load into failures), and in CI (`CI=true`) a derandomized profile, so a CI
run is reproducible: exploration with fresh random seeds happens on developers' runs, where a
new counterexample is printed with its reproduction blob and becomes a regression test.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("dev", deadline=None, print_blob=True)
settings.register_profile(
    "ci",
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
