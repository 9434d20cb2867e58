"""The one backoff rule and the one restart window, on their own: no trio, no clock."""

from __future__ import annotations

import math
import random

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import callboard
from callboard._retry import Backoff, RestartWindow
from callboard.client import Backoff as ClientBackoff
from callboard.supervisor import Backoff as SupervisorBackoff

# -- Backoff ------------------------------------------------------------------------


def test_the_ceiling_grows_by_the_multiplier_from_initial_and_stops_at_the_cap():
    backoff = Backoff(initial=0.1, max=1.0, multiplier=3.0, jitter=0.0)
    assert [backoff.delay(n) for n in range(1, 6)] == pytest.approx([0.1, 0.3, 0.9, 1.0, 1.0])
    assert Backoff(initial=1.0, max=8.0).ceiling(4) == 8.0
    assert Backoff(initial=1.0, max=8.0).ceiling(10**6) == 8.0  # no overflow
    assert Backoff(initial=0.0, max=8.0).delay(10**6) == 0.0


@given(
    initial=st.floats(0, 10),
    cap=st.floats(0, 100),
    multiplier=st.floats(1, 10),
    jitter=st.floats(0, 1),
    attempt=st.integers(1, 2000),
    seed=st.integers(0, 2**32),
)
def test_every_delay_lies_in_the_documented_band(initial, cap, multiplier, jitter, attempt, seed):
    backoff = Backoff(initial, cap, multiplier, jitter=jitter)
    ceiling = backoff.ceiling(attempt)
    by_hand = initial
    for _ in range(attempt - 1):
        by_hand = min(cap, by_hand * multiplier)
    assert ceiling == pytest.approx(min(cap, by_hand))
    delay = backoff.delay(attempt, random.Random(seed))
    assert (1 - jitter) * ceiling - 1e-12 <= delay <= ceiling <= cap


def test_the_jitter_spans_its_band_and_no_more():
    backoff = Backoff(initial=1.0, max=1.0, jitter=0.25)
    rng = random.Random(3)
    delays = [backoff.delay(1, rng) for _ in range(2000)]
    assert min(delays) >= 0.75 and max(delays) <= 1.0
    assert min(delays) < 0.76 and max(delays) > 0.99  # the whole band, not a point

    class Lowest(random.Random):
        def random(self) -> float:
            return 0.0

    assert backoff.delay(1, Lowest()) == 0.75
    assert Backoff(initial=2.0, max=8.0, jitter=1.0).delay(1, Lowest()) == 0.0
    assert Backoff(initial=2.0, max=8.0, jitter=0.0).delay(2, Lowest()) == 4.0


def test_the_same_seed_gives_the_same_delays():
    backoff = Backoff(initial=0.05, max=5.0)
    first = [backoff.delay(n, random.Random(42)) for n in range(1, 10)]
    again = [backoff.delay(n, random.Random(42)) for n in range(1, 10)]
    assert first == again
    assert len({round(backoff.delay(3, random.Random(s)), 9) for s in range(10)}) > 1


def test_the_defaults_are_the_clients_reconnection_backoff():
    backoff = Backoff()
    assert (backoff.initial, backoff.max, backoff.multiplier, backoff.jitter) == (
        0.05,
        5.0,
        2.0,
        0.5,
    )
    assert backoff.give_up_after is None


def test_the_older_names_first_cap_and_factor_still_work():
    assert Backoff(first=0.01, cap=0.1, factor=3.0, give_up_after=0.2) == Backoff(
        initial=0.01, max=0.1, multiplier=3.0, give_up_after=0.2
    )
    with pytest.raises(TypeError, match="both initial= and first="):
        Backoff(initial=0.1, first=0.2)


def test_one_type_serves_the_client_the_supervisor_and_actors():
    assert ClientBackoff is Backoff and SupervisorBackoff is Backoff
    policy = callboard.Supervision(backoff_initial=0.1, backoff_max=1.0, backoff_jitter=0.2)
    assert policy.backoff_rule == Backoff(initial=0.1, max=1.0, jitter=0.2)
    assert policy.backoff(4, random.Random(5)) == Backoff(0.1, 1.0, jitter=0.2).delay(
        4, random.Random(5)
    )


@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        ({"initial": -0.1}, ValueError, "Backoff.initial must be a finite number >= 0"),
        ({"initial": math.nan}, ValueError, "Backoff.initial"),
        ({"max": math.inf}, ValueError, "Backoff.max must be a finite number >= 0"),
        ({"multiplier": 0.5}, ValueError, "Backoff.multiplier must be a finite number >= 1"),
        ({"jitter": 1.5}, ValueError, r"Backoff.jitter must be a fraction in \[0, 1\]"),
        ({"jitter": -0.1}, ValueError, "Backoff.jitter"),
        ({"give_up_after": -1.0}, ValueError, "Backoff.give_up_after"),
        ({"initial": "1"}, TypeError, "Backoff.initial must be a number"),
        ({"jitter": True}, TypeError, "Backoff.jitter must be a number"),
    ],
)
def test_a_bad_field_is_refused_by_name(fields, error, message):
    with pytest.raises(error, match=message):
        Backoff(**fields)


def test_the_fields_are_checked_again_when_a_copy_is_made():
    with pytest.raises(ValueError, match=r"Backoff\.max"):
        attrs.evolve(Backoff(), max=-1.0)


@pytest.mark.parametrize("attempt", [0, -1, 1.0, True])
def test_attempts_count_from_one(attempt):
    with pytest.raises(ValueError, match="attempt must be an int >= 1"):
        Backoff().delay(attempt)


def test_supervision_refuses_backoff_fields_the_rule_cannot_take():
    with pytest.raises(ValueError, match=r"Supervision\.backoff_jitter"):
        callboard.Supervision(backoff_jitter=1.5)
    with pytest.raises(ValueError, match=r"Supervision\.backoff_max"):
        callboard.Supervision(backoff_max=math.inf)


# -- RestartWindow -------------------------------------------------------------------


def test_the_intensity_is_exceeded_by_restart_number_intensity_plus_one():
    window = RestartWindow(intensity=3, period=10.0)
    assert [window.record(t) for t in (0.0, 1.0, 2.0)] == [False, False, False]
    assert window.record(3.0) is True
    assert window.count(3.0) == 4


def test_restarts_older_than_the_period_no_longer_count():
    window = RestartWindow(intensity=2, period=10.0)
    assert not window.record(0.0)
    assert not window.record(5.0)
    assert not window.record(10.5)  # the one at 0 is out of the window
    assert window.count(10.5) == 2
    assert window.count(15.5) == 1  # the one at 5 is out too
    assert window.count(100.0) == 0


def test_a_restart_exactly_period_seconds_old_still_counts():
    window = RestartWindow(intensity=1, period=5.0)
    assert not window.record(0.0)
    assert window.record(5.0)
    assert not RestartWindow(intensity=1, period=5.0).record(0.0)


def test_an_intensity_of_zero_allows_no_restart():
    assert RestartWindow(intensity=0, period=1.0).record(0.0)


def test_reset_forgets_every_restart():
    window = RestartWindow(intensity=1, period=60.0)
    window.record(0.0)
    assert window.record(1.0)
    window.reset()
    assert window.count(1.0) == 0
    assert not window.record(2.0)


def test_time_does_not_go_back():
    window = RestartWindow(intensity=1, period=1.0)
    window.record(5.0)
    with pytest.raises(ValueError, match="must not go back"):
        window.record(4.0)


@pytest.mark.parametrize(
    ("intensity", "period", "message"),
    [
        (-1, 1.0, "RestartWindow.intensity must be an int >= 0"),
        (1.5, 1.0, "RestartWindow.intensity"),
        (1, 0.0, "RestartWindow.period must be a number > 0"),
        (1, -2.0, "RestartWindow.period"),
        (1, math.nan, "RestartWindow.period"),
    ],
)
def test_a_bad_window_is_refused_by_name(intensity, period, message):
    with pytest.raises(ValueError, match=message):
        RestartWindow(intensity, period)


@given(
    intensity=st.integers(0, 5),
    period=st.floats(0.1, 50),
    gaps=st.lists(st.floats(0, 20), max_size=40),
)
def test_the_window_agrees_with_counting_by_hand(intensity, period, gaps):
    window = RestartWindow(intensity, period)
    times: list[float] = []
    now = 0.0
    for gap in gaps:
        now += gap
        times.append(now)
        recent = [t for t in times if t >= now - period]
        assert window.record(now) == (len(recent) > intensity)
        assert window.count(now) == len(recent)
