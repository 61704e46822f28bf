"""Settings for the suite's hypothesis state machines: the same sequences every run."""

from __future__ import annotations

from hypothesis import HealthCheck, settings


def fixed_seed(examples: int, steps: int) -> settings:
    """``examples`` runs of up to ``steps`` steps each, from a fixed seed, with no deadline.

    Derandomized and without the example database, so a failure reproduces
    on any machine and a green run is the same run everywhere; the machines
    mount, compact and crash, which is slow by hypothesis's measure.
    """
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
