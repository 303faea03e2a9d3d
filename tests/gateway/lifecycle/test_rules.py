"""The lifecycle rule model: due times rounded to day boundaries, filters, decisions."""

from __future__ import annotations

from gateway.lifecycle.rules import DAY, Filter, Rule, due, rules_from_json, rules_to_json

MIDNIGHT = 1_700_006_400.0  # 2023-11-15T00:00:00Z
assert MIDNIGHT % DAY == 0


def test_due_rounds_up_to_the_next_midnight() -> None:
    assert due(MIDNIGHT + 10 * 3600, 1) == MIDNIGHT + 2 * DAY
    assert due(MIDNIGHT, 1) == MIDNIGHT + DAY  # already on a boundary
    assert due(MIDNIGHT + 1, 3) == MIDNIGHT + 4 * DAY
    # A short testing day rounds to its own boundaries.
    assert due(101.5, 2, day=2.0) == 106.0


def test_filter_matches_prefix_size_and_tags() -> None:
    f = Filter(form="and", prefix="logs/", tags=(("k", "v"),), size_greater_than=10,
               size_less_than=100)
    assert f.matches("logs/a", 50, {"k": "v", "x": "y"})
    assert not f.matches("data/a", 50, {"k": "v"})
    assert not f.matches("logs/a", 10, {"k": "v"})  # strictly greater
    assert not f.matches("logs/a", 100, {"k": "v"})  # strictly less
    assert not f.matches("logs/a", 50, {"k": "w"})
    assert not f.matches("logs/a", 50, None)
    assert Filter().matches("anything", 0)


def test_current_expiration_by_days_and_by_date() -> None:
    by_days = Rule(id="d", enabled=True, expiration_days=2)
    created = MIDNIGHT + 5
    assert not by_days.expires_current(created, MIDNIGHT + 3 * DAY - 1)
    assert by_days.expires_current(created, MIDNIGHT + 3 * DAY)
    by_date = Rule(id="t", enabled=True, expiration_date="2023-11-15T00:00:00.000Z",
                   expiration_date_epoch=MIDNIGHT)
    assert not by_date.expires_current(0, MIDNIGHT - 1)
    assert by_date.expires_current(MIDNIGHT + 100, MIDNIGHT + 100)  # any object, once due
    assert not Rule(id="n", enabled=True, noncurrent_days=1).expires_current(0, 1e12)


def test_noncurrent_versions_counted_from_when_they_became_noncurrent() -> None:
    rule = Rule(id="nc", enabled=True, noncurrent_days=1, newer_noncurrent_versions=2)
    since = MIDNIGHT + 100
    late = MIDNIGHT + 2 * DAY
    assert not rule.expires_noncurrent(since, 5, MIDNIGHT + 2 * DAY - 1)
    assert rule.expires_noncurrent(since, 2, late)
    assert not rule.expires_noncurrent(since, 1, late)  # one of the 2 newest kept
    plain = Rule(id="p", enabled=True, noncurrent_days=1)
    assert plain.expires_noncurrent(since, 0, late)


def test_lone_delete_marker_and_uploads() -> None:
    eodm = Rule(id="m", enabled=True, expired_object_delete_marker=True)
    assert eodm.expires_lone_marker(MIDNIGHT, MIDNIGHT)
    days = Rule(id="d", enabled=True, expiration_days=1)
    assert not days.expires_lone_marker(MIDNIGHT + 1, MIDNIGHT + DAY)
    assert days.expires_lone_marker(MIDNIGHT + 1, MIDNIGHT + 2 * DAY)
    abort = Rule(id="a", enabled=True, abort_days=1)
    assert abort.aborts_upload(MIDNIGHT + 1, MIDNIGHT + 2 * DAY)
    assert not abort.aborts_upload(MIDNIGHT + 1, MIDNIGHT + DAY)
    assert not eodm.aborts_upload(0, 1e12)


def test_json_round_trip() -> None:
    rules = [Rule(id="a", enabled=False,
                  filter=Filter(form="and", prefix="p/", tags=(("k", "v"),),
                                size_greater_than=1),
                  expiration_days=3, noncurrent_days=2, newer_noncurrent_versions=4,
                  abort_days=7),
             Rule(id="b", enabled=True, filter=Filter(form="legacy", prefix="x"),
                  expired_object_delete_marker=True)]
    assert rules_from_json(rules_to_json(rules)) == rules
