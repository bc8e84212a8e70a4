"""The dead-letter storm rules, counted in the order records are read (no server, no clock)."""

from __future__ import annotations

from kinesis_spout.deadletters.storm import StormRules


def rules(**kw: float | int | None) -> StormRules:
    settings: dict[str, float | int | None] = {"max_in_a_row": 100, "max_ratio": 0.5, "window": 1000,
                                               "min_in_window": 100}
    settings.update(kw)
    return StormRules(settings["max_in_a_row"], settings["max_ratio"], settings["window"],  # type: ignore[arg-type]
                      settings["min_in_window"])  # type: ignore[arg-type]


def letters(r: StormRules, n: int, read_now: bool = True) -> list[str]:
    return [trip.rule for _ in range(n) if (trip := r.dead_lettered(read_now)) is not None]


def test_exactly_max_in_a_row_letters_trip_and_one_record_decoded_starts_the_count_again() -> None:
    r = rules(max_ratio=0)
    assert letters(r, 99) == []
    r.decoded(1)
    assert letters(r, 99) == []  # a fresh run: 99 again, not 100
    r.decoded(1)
    assert letters(r, 99) == []
    assert letters(r, 1) == ["max_dead_letters_in_a_row"]


def test_a_burst_of_twenty_among_two_thousand_records_with_one_percent_poison_trips_nothing() -> None:
    r = rules()
    tripped = []
    for i in range(2000):
        if i % 100 == 50:
            tripped += letters(r, 1)
        else:
            r.decoded(1)
        if i == 1000:
            tripped += letters(r, 20)
    assert tripped == []


def test_the_ratio_is_over_the_window_not_over_all_time() -> None:
    r = rules(max_in_a_row=0)
    r.decoded(10_000)  # a long good past
    trips: list[str] = []
    for _ in range(400):  # then 60% of the records read are dead letters
        trips += letters(r, 3)
        r.decoded(2)
        if trips:
            break
    assert trips == ["max_dead_letter_ratio"]
    assert r.dead + r.good <= 1000


def test_the_ratio_needs_the_minimum_of_letters_and_more_than_the_ratio() -> None:
    r = rules(max_in_a_row=0)
    assert letters(r, 99) == []  # 100% but under min_dead_letters_in_window
    assert letters(r, 1) == ["max_dead_letter_ratio"]
    exact = rules(max_in_a_row=0, min_in_window=1)
    for _ in range(500):
        exact.decoded(1)
        assert letters(exact, 1) == []  # exactly half is not more than half


def test_retries_run_out_on_records_read_good_turn_them_bad_so_an_outage_trips_the_ratio() -> None:
    r = rules(max_in_a_row=0)
    r.decoded(1000)
    trips: list[str] = []
    for _ in range(600):
        r.decoded(1)  # a new record read between the failures: the run never grows
        trips += letters(r, 1, read_now=False)
    assert "max_dead_letter_ratio" in trips


def test_zero_disables_each_rule() -> None:
    r = rules(max_in_a_row=0, max_ratio=0)
    assert letters(r, 5000) == []
    assert letters(rules(max_in_a_row=None, max_ratio=None, window=None), 5000) == []
