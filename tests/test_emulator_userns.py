"""A boot that is not root names what a user namespace with real uids would need (issue 17).

Logic in one process, over a made-up /etc and /proc: the reason a nominal boot gives
names the missing piece, from the kernel's switch to the subordinate ranges.
"""

from __future__ import annotations

import os
import pwd

import pytest

from framework.emulator import SUBORDINATE_IDS_NEEDED, subordinate_range, userns_check


def _machine(tmp_path, subuid="", subgid="", max_userns="15000"):
    etc, proc = tmp_path / "etc", tmp_path / "proc"
    (proc / "sys/user").mkdir(parents=True)
    etc.mkdir()
    (etc / "subuid").write_text(subuid)
    (etc / "subgid").write_text(subgid)
    (proc / "sys/user/max_user_namespaces").write_text(max_userns + "\n")
    return etc, proc


def _tools(name):
    return f"/usr/bin/{name}"


UID = 4321


@pytest.mark.parametrize(("subuid", "subgid", "says"), [
    ("", "", "user 4321 has no subordinate uid range in"),
    ("4321:100000:65536\n", "", "user 4321 has no subordinate gid range in"),
    ("other:100000:65536\n", "4321:100000:65536\n", "no subordinate uid range"),
    ("4321:100000:1000\n", "4321:100000:65536\n", f"has 1000 ids; Android's uids need {SUBORDINATE_IDS_NEEDED}"),
])
def test_the_reason_names_the_missing_subordinate_range(tmp_path, subuid, subgid, says):
    etc, proc = _machine(tmp_path, subuid, subgid)
    assert says in userns_check(UID, etc=etc, proc=proc, which=_tools)


def test_nothing_is_missing_where_both_ranges_are_large_enough(tmp_path):
    etc, proc = _machine(tmp_path, "4321:x:65536\n4321:100000:65536\n", "4321:200000:70000\n")
    assert userns_check(UID, etc=etc, proc=proc, which=_tools) is None


def test_switched_off_namespaces_and_missing_tools_are_named(tmp_path):
    etc, proc = _machine(tmp_path, "4321:100000:65536\n", "4321:100000:65536\n", max_userns="0")
    assert "switched off" in userns_check(UID, etc=etc, proc=proc, which=_tools)
    etc, proc = _machine(tmp_path / "b", "4321:100000:65536\n", "4321:100000:65536\n")
    missing = userns_check(UID, etc=etc, proc=proc, which=lambda name: None if name == "newgidmap" else _tools(name))
    assert missing == "newgidmap not installed (Debian's uidmap package)"


def test_a_range_is_found_by_user_name_and_the_largest_wins(tmp_path):
    me = pwd.getpwuid(os.getuid()).pw_name
    path = tmp_path / "subuid"
    path.write_text(f"# a comment\n{me}:100000:65536\n{os.getuid()}:300000:70000\nbad line\n")
    granted = subordinate_range(path, os.getuid(), me)
    assert (granted.start, granted.count) == (300000, 70000)
    assert subordinate_range(tmp_path / "missing", os.getuid(), me) is None


def test_a_boot_that_is_not_root_gives_the_user_namespace_s_reason(monkeypatch, tmp_path):
    from framework.emulator import BootConfig
    from framework.emulator._boot import _isolation

    monkeypatch.setattr(os, "geteuid", lambda: UID)
    why = userns_check() or "nothing is missing for one, but only `npuemu boot` enters it (this process did not)"
    assert _isolation(tmp_path, BootConfig()) == f"nominal: init is not root, and no user namespace: {why}"


def test_only_a_namespace_of_its_own_counts(tmp_path):
    from framework.emulator import in_user_namespace

    (tmp_path / "self").mkdir()
    (tmp_path / "self/uid_map").write_text("         0          0 4294967295\n")
    assert not in_user_namespace(tmp_path)
    (tmp_path / "self/uid_map").write_text("         0       4242          1\n         1     300000      19999\n")
    assert in_user_namespace(tmp_path)
