"""The activity manager's state: importance levels, processes, change records."""

from __future__ import annotations

import json
from pathlib import Path

import msgpack
import pytest

from framework.binder._status import IllegalArgumentException, IllegalStateException
from framework.server._activity import (
    IMPORTANCE_CACHED,
    IMPORTANCE_FOREGROUND,
    IMPORTANCE_FOREGROUND_SERVICE,
    IMPORTANCE_GONE,
    IMPORTANCE_PERCEPTIBLE,
    IMPORTANCE_SERVICE,
    IMPORTANCE_TOP_SLEEPING,
    IMPORTANCE_VISIBLE,
    ActivityState,
    ChangeKind,
    Importance,
    RunningAppProcessInfo,
    UidImportanceChange,
    importance_name,
    launch_importance,
    parse_importance,
)
from framework.server._package import PackageManager

APPS = Path(__file__).parent.parent / "apps"
CAMERA, PHOTOS = "com.example.npuemu.camera", "com.example.npuemu.photos"


# ------------------------------------------------------------------ importance


def test_importance_values_are_androids():
    assert [
        IMPORTANCE_FOREGROUND,
        IMPORTANCE_FOREGROUND_SERVICE,
        IMPORTANCE_VISIBLE,
        IMPORTANCE_PERCEPTIBLE,
        IMPORTANCE_SERVICE,
        IMPORTANCE_TOP_SLEEPING,
        IMPORTANCE_CACHED,
        IMPORTANCE_GONE,
    ] == [100, 125, 200, 230, 300, 325, 400, 1000]
    assert [level.label for level in Importance] == [
        "foreground",
        "foreground_service",
        "visible",
        "perceptible",
        "service",
        "top_sleeping",
        "cached",
        "gone",
    ]
    # Lower is more important, and the levels sort that way.
    assert sorted(Importance, reverse=True)[0] is Importance.GONE
    # Formatting gives the number, so logs and HAL configs see plain integers.
    assert f"{IMPORTANCE_VISIBLE}" == "200"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("foreground", IMPORTANCE_FOREGROUND),
        ("FOREGROUND", IMPORTANCE_FOREGROUND),
        ("foreground_service", IMPORTANCE_FOREGROUND_SERVICE),
        ("foreground-service", IMPORTANCE_FOREGROUND_SERVICE),
        ("IMPORTANCE_FOREGROUND_SERVICE", IMPORTANCE_FOREGROUND_SERVICE),
        ("visible", IMPORTANCE_VISIBLE),
        (" perceptible ", IMPORTANCE_PERCEPTIBLE),
        ("Service", IMPORTANCE_SERVICE),
        ("top-sleeping", IMPORTANCE_TOP_SLEEPING),
        ("cached", IMPORTANCE_CACHED),
        ("gone", IMPORTANCE_GONE),
        ("200", IMPORTANCE_VISIBLE),
        ("+400", IMPORTANCE_CACHED),
        (125, IMPORTANCE_FOREGROUND_SERVICE),
        (1000, IMPORTANCE_GONE),
        (IMPORTANCE_SERVICE, IMPORTANCE_SERVICE),
        (Importance.CACHED, IMPORTANCE_CACHED),
    ],
)
def test_parse_importance_reads_names_and_numbers(text, expected):
    level = parse_importance(text)
    assert level == expected
    assert type(level) is int  # plain, as the arbiter and the wire want it


@pytest.mark.parametrize("bad", ["forground", "background", "", "150", 150, -100, 3.5, True, None, "1e2", "+-5", "١٠٠"])
def test_parse_importance_refuses_anything_else_listing_the_valid_names(bad):
    with pytest.raises(IllegalArgumentException) as info:
        parse_importance(bad)
    message = str(info.value)
    for level in Importance:
        assert f"{level.label} ({level.value})" in message
    assert isinstance(info.value, ValueError)


def test_a_misspelt_importance_gets_a_suggestion():
    with pytest.raises(IllegalArgumentException, match=r"did you mean foreground\?"):
        parse_importance("forground")
    with pytest.raises(IllegalArgumentException, match=r"did you mean perceptible\?"):
        parse_importance("perceptable")


def test_importance_name_for_known_and_unknown_values():
    assert importance_name(230) == "perceptible"
    assert importance_name(IMPORTANCE_GONE) == "gone"
    assert importance_name(150) == "150"


def test_launch_importance_reads_the_manifest_meta_data():
    assert launch_importance({}) == IMPORTANCE_FOREGROUND
    assert launch_importance({}, default=IMPORTANCE_CACHED) == IMPORTANCE_CACHED
    assert launch_importance({"npuemu.launch.importance": "service"}) == IMPORTANCE_SERVICE
    with pytest.raises(IllegalArgumentException, match=r"<meta-data npuemu.launch.importance>: unknown importance 'backgrond'"):
        launch_importance({"npuemu.launch.importance": "backgrond"})
    with pytest.raises(IllegalArgumentException, match="cannot be launched as gone"):
        launch_importance({"npuemu.launch.importance": "gone"})


def test_the_sample_apps_launch_at_the_importance_their_scenarios_need():
    pm = PackageManager()
    levels = {
        name: launch_importance(pm.installPackage(APPS / name).metaData)
        for name in ("camera", "assistant", "photos", "legacy", "rogue")
    }
    assert levels["camera"] == IMPORTANCE_FOREGROUND
    # The assistant must outrank photos to displace it under the budget policy.
    assert levels["assistant"] < levels["photos"]
    assert levels["camera"] < levels["assistant"]


# --------------------------------------------------------------- ActivityState


def started(state: ActivityState, uid: int, package: str, pid: int, importance=IMPORTANCE_FOREGROUND):
    [change] = state.process_started(uid, package, pid, importance)
    return change


def test_process_start_is_a_change_from_gone():
    state = ActivityState()
    change = started(state, 10000, CAMERA, 4242, "foreground")
    assert change == UidImportanceChange(ChangeKind.STARTED, 10000, CAMERA, 4242, IMPORTANCE_GONE, IMPORTANCE_FOREGROUND)
    assert state.getUidImportance(10000) == IMPORTANCE_FOREGROUND
    assert state.getPackageImportance(CAMERA) == IMPORTANCE_FOREGROUND
    assert state.pid_of(10000) == state.pid_of(CAMERA) == 4242
    assert state.uid_of_pid(4242) == 10000
    assert state.is_running(CAMERA)


def test_set_importance_emits_one_change_and_none_for_a_repeat():
    state = ActivityState()
    started(state, 10001, PHOTOS, 5000, "visible")
    assert state.set_importance(PHOTOS, "cached") == [
        UidImportanceChange(ChangeKind.IMPORTANCE, 10001, PHOTOS, 5000, IMPORTANCE_VISIBLE, IMPORTANCE_CACHED)
    ]
    assert state.set_importance(10001, 400) == []  # by uid, and already cached
    assert state.set_importance(10001, "service")[0].old == IMPORTANCE_CACHED
    assert state.getUidImportance(10001) == IMPORTANCE_SERVICE


def test_death_is_a_change_to_gone_and_the_uid_may_start_again():
    state = ActivityState()
    started(state, 10000, CAMERA, 4242)
    state.set_importance(CAMERA, "top_sleeping")
    assert state.process_died(4242) == [
        UidImportanceChange(ChangeKind.DIED, 10000, CAMERA, 4242, IMPORTANCE_TOP_SLEEPING, IMPORTANCE_GONE)
    ]
    assert state.getUidImportance(10000) == IMPORTANCE_GONE
    assert state.pid_of(CAMERA) is None
    assert state.uid_of_pid(4242) is None
    # A second report of the same death (the kill and the death notice race) is quiet.
    assert state.process_died(4242) == []
    # Restarted under a new pid; the old pid is free for anyone.
    again = started(state, 10000, CAMERA, 4300, "visible")
    assert (again.kind, again.old, again.new) == (ChangeKind.STARTED, IMPORTANCE_GONE, IMPORTANCE_VISIBLE)
    started(state, 10001, PHOTOS, 4242)
    assert state.dump()["processes"][1]["starts"] == 2


def test_unknown_uids_and_packages_are_gone():
    state = ActivityState()
    assert state.getUidImportance(10099) == IMPORTANCE_GONE
    assert state.getPackageImportance("com.example.never") == IMPORTANCE_GONE
    assert state.pid_of("com.example.never") is None
    assert state.process_died(31337) == []


def test_set_importance_of_an_app_that_is_not_running_is_an_error_and_changes_nothing():
    state = ActivityState()
    with pytest.raises(IllegalArgumentException, match="com.example.never"):
        state.set_importance("com.example.never", "visible")
    started(state, 10000, CAMERA, 4242)
    state.process_died(4242)
    before = state.dump()
    with pytest.raises(IllegalStateException, match="is not running"):
        state.set_importance(CAMERA, "visible")
    assert state.dump() == before


def test_a_running_app_cannot_be_declared_gone():
    state = ActivityState()
    started(state, 10000, CAMERA, 4242)
    with pytest.raises(IllegalArgumentException, match="npuemu am kill com.example.npuemu.camera"):
        state.set_importance(CAMERA, "gone")
    assert state.getUidImportance(10000) == IMPORTANCE_FOREGROUND


def test_a_bad_level_changes_nothing():
    state = ActivityState()
    started(state, 10000, CAMERA, 4242)
    before = state.dump()
    with pytest.raises(IllegalArgumentException, match="use one of"):
        state.set_importance(CAMERA, "backgroundish")
    assert state.dump() == before


@pytest.mark.parametrize(
    "args, error, needle",
    [
        ((10000, CAMERA, 4243), IllegalStateException, "already running as pid 4242"),
        ((10000, PHOTOS, 4243), IllegalStateException, "uid 10000 belongs to com.example.npuemu.camera"),
        ((10001, CAMERA, 4243), IllegalStateException, "runs as uid 10000"),
        ((10001, PHOTOS, 4242), IllegalStateException, "pid 4242 is already com.example.npuemu.camera"),
        ((1000, "android", 99), IllegalArgumentException, "not an application uid"),
        ((10001, "", 99), IllegalArgumentException, "non-empty string"),
        ((10001, PHOTOS, 0), IllegalArgumentException, "pid is at least 1"),
        (("10001", PHOTOS, 99), IllegalArgumentException, "a uid is an int"),
        ((10001, PHOTOS, 99, "gone"), IllegalArgumentException, "cannot start as gone"),
        ((10001, PHOTOS, 99, "sideways"), IllegalArgumentException, "unknown importance"),
    ],
)
def test_inconsistent_starts_are_refused_and_change_nothing(args, error, needle):
    state = ActivityState()
    started(state, 10000, CAMERA, 4242)
    before = state.dump()
    with pytest.raises(error, match=needle):
        state.process_started(*args)
    assert state.dump() == before


def test_running_processes_are_listed_most_important_first():
    state = ActivityState()
    started(state, 10002, "com.example.c", 3, "cached")
    started(state, 10000, "com.example.a", 1, "visible")
    started(state, 10001, "com.example.b", 2, "visible")
    started(state, 10003, "com.example.d", 4, "foreground")
    started(state, 10004, "com.example.e", 5, "service")
    state.process_died(5)
    assert state.getRunningAppProcesses() == [
        RunningAppProcessInfo("com.example.d", 4, 10003, IMPORTANCE_FOREGROUND),
        RunningAppProcessInfo("com.example.a", 1, 10000, IMPORTANCE_VISIBLE),
        RunningAppProcessInfo("com.example.b", 2, 10001, IMPORTANCE_VISIBLE),
        RunningAppProcessInfo("com.example.c", 3, 10002, IMPORTANCE_CACHED),
    ]


def test_a_follower_replaying_the_changes_agrees_with_the_state():
    """What the npu service does: keep its own uid -> importance map from the records."""
    state = ActivityState()
    follower: dict[int, int] = {}
    died: list[int] = []

    def apply(changes):
        for change in changes:
            follower[change.uid] = change.new
            if change.kind is ChangeKind.DIED:
                died.append(change.uid)

    apply(state.process_started(10000, CAMERA, 10, "foreground"))
    apply(state.process_started(10001, PHOTOS, 11, "service"))
    apply(state.set_importance(CAMERA, "top_sleeping"))
    apply(state.set_importance(PHOTOS, "service"))
    apply(state.process_died(11))
    apply(state.process_died(11))
    apply(state.process_started(10001, PHOTOS, 12, "cached"))
    apply(state.set_importance(10000, "foreground"))
    assert follower == {uid: state.getUidImportance(uid) for uid in (10000, 10001)}
    assert died == [10001]


def test_separate_states_share_nothing():
    a, b = ActivityState(), ActivityState()
    started(a, 10000, CAMERA, 4242)
    assert b.getUidImportance(10000) == IMPORTANCE_GONE
    started(b, 10000, CAMERA, 4242)


def test_dump_is_plain_data_for_dumpsys():
    state = ActivityState()
    started(state, 10001, PHOTOS, 11, "service")
    started(state, 10000, CAMERA, 10, "foreground")
    started(state, 10002, "com.example.npuemu.rogue", 12, "cached")
    state.process_died(12)
    data = state.dump()
    assert json.loads(json.dumps(data)) == data
    assert msgpack.unpackb(msgpack.packb(data)) == data
    assert [row["package"] for row in data["processes"]] == [CAMERA, PHOTOS]
    assert data["processes"][0] == {
        "uid": 10000,
        "package": CAMERA,
        "pid": 10,
        "importance": 100,
        "importance_name": "foreground",
        "starts": 1,
        "deaths": 0,
    }
    assert data["gone"] == [
        {
            "uid": 10002,
            "package": "com.example.npuemu.rogue",
            "pid": None,
            "importance": 1000,
            "importance_name": "gone",
            "starts": 1,
            "deaths": 1,
        }
    ]
    assert type(data["processes"][0]["importance"]) is int


def test_importances_given_out_are_what_the_npu_service_accepts():
    """Every value this module hands on goes straight into the arbiter's checks."""
    from framework.server import _priority

    state = ActivityState()
    changes = state.process_started(10000, CAMERA, 10, "visible")
    changes += state.set_importance(CAMERA, Importance.CACHED)
    changes += state.process_died(10)
    values = [c.old for c in changes] + [c.new for c in changes]
    values += [state.getUidImportance(10000), parse_importance("service"), launch_importance({})]
    for value in values:
        assert _priority.check_importance(value) == value
    import framework.server

    for level in Importance:
        assert getattr(framework.server, f"IMPORTANCE_{level.name}") == level.value


def test_change_records_are_plain_data_too():
    state = ActivityState()
    [change] = state.process_started(10000, CAMERA, 10, "visible")
    assert change.to_dict() == {"kind": "started", "uid": 10000, "package": CAMERA, "pid": 10, "old": 1000, "new": 200}
    with pytest.raises(AttributeError):
        change.new = IMPORTANCE_GONE  # frozen: a follower cannot rewrite history
