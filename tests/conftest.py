"""Test configuration: hypothesis profiles and the numba-disabled check.

* ``ci`` (selected when CI=true): derandomized, so CI is reproducible.
* ``dev`` (default): random, more examples locally are up to the user
  (HYPOTHESIS_PROFILE=thorough).
"""
import os

# the in-process CLI tests monkeypatch modules: verify runs them serially unless a
# test asks for workers (checks/cli/main.py, RNNGAP_VERIFY_WORKERS)
os.environ.setdefault("RNNGAP_VERIFY_WORKERS", "1")

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", derandomize=True, deadline=None, max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile(
    "dev", deadline=None, max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile(
    "thorough", deadline=None, max_examples=2000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_default = "ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "dev"
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", _default))


import pytest


@pytest.fixture(scope="session")
def all_certificates():
    """``certify(full=True)`` once per test session, on two worker processes (one on a
    one-core machine: z3's limits are wall-clock) (every
    certificate of the catalogue, the slow ones included), by construction name:
    the tests that read the unmutated certificates share this one run."""
    from rnngap.checks.certify.run import certify
    from rnngap.checks.verify.engine import default_workers
    return certify(workers=min(2, default_workers()), full=True)
