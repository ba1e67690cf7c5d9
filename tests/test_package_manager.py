"""The package manager: manifest parsing, safety, installation, uids, permissions."""

from __future__ import annotations

import json
import os
import shutil
import textwrap
import time
from pathlib import Path

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework.binder._status import (
    EX_SERVICE_SPECIFIC,
    IllegalArgumentException,
    SecurityException,
    ServiceSpecificException,
)
from framework.server._package import (
    FEATURE_NEURAL_PROCESSING_UNIT,
    INSTALL_FAILED_MISSING_FEATURE,
    INSTALL_FAILED_OLDER_SDK,
    INSTALL_FAILED_VERSION_DOWNGRADE,
    INSTALL_PARSE_FAILED_BAD_MANIFEST,
    INSTALL_PARSE_FAILED_BAD_PACKAGE_NAME,
    INSTALL_PARSE_FAILED_MANIFEST_EMPTY,
    INSTALL_PARSE_FAILED_MANIFEST_MALFORMED,
    INSTALL_PARSE_FAILED_NOT_APK,
    MAX_MANIFEST_BYTES,
    PERMISSION_ACCESS_NPU_MODEL_MANAGER_API,
    PERMISSION_ATTRIBUTE_WORK_TO_OTHER_APPS,
    PERMISSION_DENIED,
    PERMISSION_DUMP,
    PERMISSION_GRANTED,
    FeatureInfo,
    NameNotFoundException,
    PackageManager,
    PackageManagerException,
    PackageParserException,
    UnsafeManifestException,
    parse_manifest,
    validate_package_name,
)

HERE = Path(__file__).parent
FIXTURES = HERE / "manifests"
APPS = HERE.parent / "apps"

NS = 'xmlns:android="http://schemas.android.com/apk/res/android"'


def write_app(root: Path, name: str, body: str, *, package: str | None = None, attrs: str = "") -> Path:
    """An app folder holding a manifest with ``body`` inside <manifest>."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    package = package or f"com.example.{name}"
    (folder / "AndroidManifest.xml").write_text(
        f'<?xml version="1.0" encoding="utf-8"?>\n<manifest {NS} package="{package}" {attrs}>\n'
        + textwrap.dedent(body)
        + "\n</manifest>\n"
    )
    return folder


def parse_body(tmp_path: Path, body: str, **kwargs):
    return parse_manifest(write_app(tmp_path, "app", body, **kwargs))


# ------------------------------------------------------------------ every construct


def test_full_manifest_reads_every_construct():
    p = parse_manifest(FIXTURES / "full.xml")
    assert p.packageName == "com.example.full"
    assert p.versionCode == 42  # written as 0x2A
    assert p.versionName == "4.2-beta"
    assert (p.minSdkVersion, p.targetSdkVersion) == (26, 37)
    assert p.label == "Full & Complete"
    assert p.reqFeatures == (
        FeatureInfo("android.hardware.npu", required=False),
        FeatureInfo("android.hardware.camera", required=True),
        FeatureInfo("android.hardware.camera.autofocus", required=False),
    )
    # Duplicates collapse, order is kept, uses-permission-sdk-23 counts.
    assert p.requestedPermissions == (
        PERMISSION_ACCESS_NPU_MODEL_MANAGER_API,
        PERMISSION_ATTRIBUTE_WORK_TO_OTHER_APPS,
        "android.permission.CAMERA",
    )
    # A meta-data with only android:resource has no value to keep.
    assert dict(p.metaData) == {"npuemu.launch.importance": "perceptible"}
    assert p.manifestPath == os.path.abspath(FIXTURES / "full.xml")
    assert p.declares_feature(FEATURE_NEURAL_PROCESSING_UNIT)
    assert not p.requires_feature(FEATURE_NEURAL_PROCESSING_UNIT)
    assert p.requires_feature("android.hardware.camera")


def test_defaults_are_androids():
    p = parse_manifest(FIXTURES / "minimal.xml")
    assert p.packageName == "com.example.minimal"
    assert p.versionCode == 0
    assert p.versionName is None
    assert p.minSdkVersion == 1
    assert p.targetSdkVersion == 1  # defaults to minSdkVersion
    assert p.label is None
    assert p.reqFeatures == ()
    assert p.requestedPermissions == ()
    assert dict(p.metaData) == {}


def test_target_sdk_defaults_to_min_sdk(tmp_path):
    p = parse_body(tmp_path, '<uses-sdk android:minSdkVersion="30" />')
    assert (p.minSdkVersion, p.targetSdkVersion) == (30, 30)


def test_uses_feature_required_defaults_to_true(tmp_path):
    p = parse_body(tmp_path, '<uses-feature android:name="android.hardware.npu" />')
    assert p.reqFeatures == (FeatureInfo("android.hardware.npu", required=True),)


def test_the_seeds_npu_declaration_is_optional(tmp_path):
    p = parse_body(tmp_path, '<uses-feature android:name="android.hardware.npu" android:required="false" />')
    assert p.reqFeatures == (FeatureInfo("android.hardware.npu", required=False),)


def test_a_feature_declared_twice_is_required_if_either_says_so(tmp_path):
    p = parse_body(
        tmp_path,
        """
        <uses-feature android:name="android.hardware.npu" android:required="false" />
        <uses-feature android:name="android.hardware.npu" />
        """,
    )
    assert p.reqFeatures == (FeatureInfo("android.hardware.npu", required=True),)


def test_the_android_prefix_is_any_prefix_bound_to_the_namespace(tmp_path):
    folder = tmp_path / "a"
    folder.mkdir()
    (folder / "AndroidManifest.xml").write_text(
        '<manifest xmlns:a="http://schemas.android.com/apk/res/android" package="com.example.a" a:versionCode="7">'
        '<uses-feature a:name="android.hardware.npu" a:required="false"/></manifest>'
    )
    p = parse_manifest(folder)
    assert p.versionCode == 7
    assert p.reqFeatures == (FeatureInfo("android.hardware.npu", required=False),)


def test_elements_in_other_namespaces_and_unknown_elements_are_ignored(tmp_path):
    p = parse_body(
        tmp_path,
        """
        <x:uses-permission xmlns:x="urn:other" android:name="android.permission.NOPE" />
        <compatible-screens />
        <uses-permission android:name="android.permission.YES" />
        """,
    )
    assert p.requestedPermissions == ("android.permission.YES",)


def test_a_manifest_file_path_works_as_well_as_its_folder(tmp_path):
    folder = write_app(tmp_path, "cam", "")
    assert parse_manifest(folder) == parse_manifest(folder / "AndroidManifest.xml")


def test_parsed_packages_are_plain_data():
    p = parse_manifest(FIXTURES / "full.xml")
    data = p.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert msgpack.unpackb(msgpack.packb(data)) == data
    assert data["reqFeatures"][0] == {"name": "android.hardware.npu", "required": False}


# -------------------------------------------------------------------- the samples


def test_sample_manifests_declare_what_their_scenarios_rely_on():
    pm = PackageManager()
    apps = {name: pm.installPackage(APPS / name) for name in ("camera", "assistant", "photos", "legacy", "rogue")}
    assert len({info.packageName for info in apps.values()}) == 5
    for name, info in apps.items():
        assert pm.checkPermission(PERMISSION_ACCESS_NPU_MODEL_MANAGER_API, info.uid) == PERMISSION_GRANTED, name
        # Nobody in the demo may attribute work to another uid; rogue tries to.
        assert pm.checkPermission(PERMISSION_ATTRIBUTE_WORK_TO_OTHER_APPS, info.uid) == PERMISSION_DENIED, name
        # Every sample installs on a device without an NPU: the feature is optional.
        assert not info.requires_feature(FEATURE_NEURAL_PROCESSING_UNIT), name
        assert info.targetSdkVersion == 37, name
    for name in ("camera", "assistant", "photos", "rogue"):
        assert apps[name].declares_feature(FEATURE_NEURAL_PROCESSING_UNIT), name
    assert not apps["legacy"].declares_feature(FEATURE_NEURAL_PROCESSING_UNIT)
    assert apps["camera"].metaData["npuemu.launch.importance"] == "foreground"


def test_sample_apps_install_on_a_device_without_an_npu():
    pm = PackageManager(system_features=())
    for name in ("camera", "assistant", "photos", "legacy", "rogue"):
        pm.installPackage(APPS / name)
    assert len(pm.getInstalledPackages()) == 5


# ------------------------------------------------------------- malicious manifests


@pytest.mark.parametrize(
    "fixture, detail",
    [
        ("billion_laughs.xml", "DTD"),
        ("external_entity.xml", "DTD"),
        ("external_dtd.xml", "http://attacker.invalid/evil.dtd"),
    ],
)
def test_dtds_entities_and_external_references_are_refused(fixture, detail):
    path = FIXTURES / fixture
    started = time.process_time()
    with pytest.raises(UnsafeManifestException) as info:
        parse_manifest(path)
    # Refused before any expansion: the billion laughs would take gigabytes and
    # minutes; a refusal takes microseconds (a generous CPU-time bound, not a benchmark).
    assert time.process_time() - started < 5
    e = info.value
    assert str(path) in str(e)
    assert detail in str(e)
    assert "refused" in str(e)
    assert e.error_code == INSTALL_PARSE_FAILED_BAD_MANIFEST
    assert isinstance(e, ValueError)
    # The external entity's target never made it into an error or a field.
    assert "root:" not in str(e)


def test_a_parameter_entity_pulling_in_an_external_dtd_is_refused(tmp_path):
    # A parameter entity pulling in an external DTD: the classic blind-XXE opener.
    path = tmp_path / "AndroidManifest.xml"
    path.write_text(
        '<?xml version="1.0"?>\n<!DOCTYPE m [<!ENTITY % ext SYSTEM "file:///etc/hostname"> %ext;]>\n'
        f'<manifest {NS} package="com.example.pe" />\n'
    )
    with pytest.raises(UnsafeManifestException, match="refused"):
        parse_manifest(path)


def test_installing_a_malicious_manifest_changes_nothing(tmp_path):
    pm = PackageManager()
    folder = tmp_path / "laughs"
    folder.mkdir()
    shutil.copy(FIXTURES / "billion_laughs.xml", folder / "AndroidManifest.xml")
    with pytest.raises(UnsafeManifestException):
        pm.installPackage(folder)
    assert pm.getInstalledPackages() == []
    assert pm.dump()["uids"] == []
    # And the next good install still gets the first uid.
    assert pm.installPackage(FIXTURES / "minimal.xml").uid == 10000


def test_undefined_entities_are_a_syntax_error_not_an_expansion(tmp_path):
    with pytest.raises(PackageParserException, match=r":3:\d+: not well-formed XML: undefined entity"):
        parse_body(tmp_path, '<application android:label="&secret;" />')


def test_a_huge_manifest_is_refused_unread(tmp_path):
    path = tmp_path / "AndroidManifest.xml"
    path.write_bytes(b"<manifest>" + b" " * MAX_MANIFEST_BYTES + b"</manifest>")
    with pytest.raises(PackageParserException, match="larger than") as info:
        parse_manifest(path)
    assert str(path) in str(info.value)


# -------------------------------------------------------------- malformed manifests


@pytest.mark.parametrize(
    "fixture, code, needle",
    [
        ("not_xml.xml", INSTALL_PARSE_FAILED_BAD_MANIFEST, ":1:1: not well-formed XML: syntax error"),
        ("truncated.xml", INSTALL_PARSE_FAILED_BAD_MANIFEST, "not well-formed XML"),
        ("wrong_root.xml", INSTALL_PARSE_FAILED_MANIFEST_MALFORMED, ":2: the root element is <application>, expected <manifest>"),
        ("missing_package.xml", INSTALL_PARSE_FAILED_BAD_PACKAGE_NAME, ":2: <manifest> has no package attribute"),
        ("bad_package.xml", INSTALL_PARSE_FAILED_BAD_PACKAGE_NAME, "segment '1camera' must start with a letter"),
    ],
)
def test_malformed_manifests_name_the_file_and_the_problem(fixture, code, needle):
    path = FIXTURES / fixture
    with pytest.raises(PackageParserException) as info:
        parse_manifest(path)
    e = info.value
    assert not isinstance(e, UnsafeManifestException)
    message = str(e)
    assert message.startswith(str(path))
    assert needle in message
    assert e.error_code == code
    assert e.path == str(path)
    # One clear line, and no parser internals chained behind it.
    assert "\n" not in message
    assert e.__cause__ is None and e.__suppress_context__


@pytest.mark.parametrize(
    "body, needle",
    [
        ('<uses-feature android:required="false" />', ":3: <uses-feature> has no android:name"),
        ('<uses-feature name="android.hardware.npu" />', "has no android:name; it has name= without the android: prefix"),
        (
            '<uses-feature xmlns:x="http://example.com/wrong" x:name="android.hardware.npu" />',
            "its name is in the namespace 'http://example.com/wrong'",
        ),
        ('<uses-feature android:name="android.hardware.npu" android:required="yes" />', 'must be "true" or "false"'),
        ('<uses-feature android:name="npu" />', "is not a valid feature name"),
        ("<uses-permission />", "<uses-permission> has no android:name"),
        ('<uses-permission android:name="ACCESS NPU" />', "is not a valid permission name"),
        ('<uses-sdk android:targetSdkVersion="thirty-seven" />', "android:targetSdkVersion='thirty-seven' is not an integer"),
        ('<uses-sdk android:minSdkVersion="0" />', "out of range"),
        ('<uses-sdk android:minSdkVersion="29" /><uses-sdk android:minSdkVersion="30" />', "more than one <uses-sdk>"),
        ("<application /><application />", "more than one <application>"),
        ("<application><meta-data android:value='x' /></application>", "<meta-data> has no android:name"),
    ],
)
def test_malformed_elements_are_reported_with_their_line(tmp_path, body, needle):
    with pytest.raises(PackageParserException) as info:
        parse_body(tmp_path, body)
    assert needle in str(info.value)
    assert str(info.value).startswith(str(tmp_path / "app" / "AndroidManifest.xml") + ":")
    assert info.value.error_code == INSTALL_PARSE_FAILED_MANIFEST_MALFORMED


@pytest.mark.parametrize("version", ['"-1"', '"2147483648"', '"1.5"', '""'])
def test_bad_version_codes_are_refused(tmp_path, version):
    with pytest.raises(PackageParserException, match="versionCode"):
        parse_body(tmp_path, "", attrs=f"android:versionCode={version}")


def test_a_missing_android_namespace_declaration_gets_a_hint(tmp_path):
    path = tmp_path / "AndroidManifest.xml"
    path.write_text('<manifest package="com.example.x"><uses-feature android:name="android.hardware.npu"/></manifest>')
    with pytest.raises(PackageParserException, match=r"unbound prefix; declare xmlns:android="):
        parse_manifest(path)


def test_a_namespaced_root_is_the_wrong_root(tmp_path):
    path = tmp_path / "AndroidManifest.xml"
    path.write_text(f'<android:manifest {NS} package="com.example.x" />')
    with pytest.raises(PackageParserException, match="expected <manifest>"):
        parse_manifest(path)


def test_android_package_instead_of_package_gets_a_hint(tmp_path):
    path = tmp_path / "AndroidManifest.xml"
    path.write_text(f'<manifest {NS} android:package="com.example.x" />')
    with pytest.raises(PackageParserException, match="plain attribute, not android:package"):
        parse_manifest(path)


@pytest.mark.parametrize(
    "content, code, needle",
    [
        (None, INSTALL_PARSE_FAILED_NOT_APK, "no such file"),
        (b"", INSTALL_PARSE_FAILED_MANIFEST_EMPTY, "empty"),
        (b"   \n", INSTALL_PARSE_FAILED_MANIFEST_EMPTY, "empty"),
        (b"\xff\xfe\x00garbage\x00", INSTALL_PARSE_FAILED_BAD_MANIFEST, "not well-formed XML"),
        (b'<?xml version="1.0" encoding="klingon"?><manifest/>', INSTALL_PARSE_FAILED_BAD_MANIFEST, "klingon"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", INSTALL_PARSE_FAILED_BAD_MANIFEST, "not well-formed XML"),
    ],
)
def test_unreadable_or_binary_files_are_clear_errors(tmp_path, content, code, needle):
    folder = tmp_path / "app"
    folder.mkdir()
    if content is not None:
        (folder / "AndroidManifest.xml").write_bytes(content)
    with pytest.raises(PackageParserException) as info:
        parse_manifest(folder)
    assert info.value.error_code == code
    assert needle in str(info.value)
    assert str(folder / "AndroidManifest.xml") in str(info.value)


def test_a_path_that_is_not_a_path_is_a_clear_error():
    with pytest.raises(PackageParserException, match="not a usable path"):
        parse_manifest("apps/\x00camera")
    with pytest.raises(PackageParserException, match="not a usable path"):
        parse_manifest(42)


@pytest.mark.parametrize(
    "name, ok",
    [
        ("com.example.camera", True),
        ("a.b", True),
        ("com.Example_1.x_2", True),
        ("camera", False),
        ("com..camera", False),
        (".com.camera", False),
        ("com.camera.", False),
        ("com.1camera", False),
        ("com._camera", False),
        ("com.came-ra", False),
        ("com.caméra", False),
        ("a." + "b" * 300, False),
        ("", False),
    ],
)
def test_package_names_follow_androids_rule(name, ok):
    if ok:
        assert validate_package_name(name) == name
    else:
        with pytest.raises(ValueError):
            validate_package_name(name)


# ------------------------------------------------------------------- installation


def test_uids_are_assigned_from_10000_in_install_order_and_kept_across_reinstalls(tmp_path):
    pm = PackageManager()
    a = pm.installPackage(write_app(tmp_path, "alpha", ""))
    b = pm.installPackage(write_app(tmp_path, "beta", ""))
    assert (a.uid, b.uid) == (10000, 10001)
    # Reinstall alpha from a newer build in another folder: same uid, new contents.
    a2 = pm.installPackage(
        write_app(tmp_path / "v2", "alpha", '<uses-permission android:name="android.permission.CAMERA" />', attrs='android:versionCode="2"')
    )
    assert a2.uid == 10000
    assert a2.versionCode == 2
    assert pm.getPackageInfo("com.example.alpha") == a2
    c = pm.installPackage(write_app(tmp_path, "gamma", ""))
    assert c.uid == 10002
    assert [info.packageName for info in pm.getInstalledPackages()] == [
        "com.example.alpha",
        "com.example.beta",
        "com.example.gamma",
    ]


def test_a_deleted_package_keeps_its_uid_and_others_do_not_take_it(tmp_path):
    pm = PackageManager()
    a = pm.installPackage(write_app(tmp_path, "alpha", ""))
    pm.deletePackage("com.example.alpha")
    assert not pm.isPackageInstalled("com.example.alpha")
    with pytest.raises(NameNotFoundException):
        pm.getPackageInfoForUid(a.uid)
    assert pm.installPackage(write_app(tmp_path, "beta", "")).uid == 10001
    assert pm.installPackage(write_app(tmp_path, "alpha", "")).uid == 10000
    with pytest.raises(NameNotFoundException):
        pm.deletePackage("com.example.nothing")


def test_separate_package_managers_share_nothing(tmp_path):
    folder = write_app(tmp_path, "alpha", "")
    first, second = PackageManager(), PackageManager()
    first.installPackage(write_app(tmp_path, "zeta", ""))
    assert first.installPackage(folder).uid == 10001
    assert second.installPackage(folder).uid == 10000
    assert not second.isPackageInstalled("com.example.zeta")


def test_an_app_requiring_a_missing_feature_is_refused(tmp_path):
    pm = PackageManager(system_features=())
    with pytest.raises(PackageManagerException) as info:
        pm.installPackage(FIXTURES / "requires_npu.xml")
    e = info.value
    assert e.error_code == INSTALL_FAILED_MISSING_FEATURE
    assert e.error_name == "INSTALL_FAILED_MISSING_FEATURE"
    assert "android.hardware.npu" in str(e)
    assert str(FIXTURES / "requires_npu.xml") in str(e)
    assert 'android:required="false"' in str(e)  # tells the developer the way out
    assert pm.getInstalledPackages() == []
    # Nothing was reserved either: the next app gets the first uid.
    assert pm.installPackage(FIXTURES / "minimal.xml").uid == 10000


def test_an_app_requiring_a_feature_the_device_has_installs():
    pm = PackageManager(system_features={"android.hardware.npu", "android.hardware.camera"})
    info = pm.installPackage(FIXTURES / "requires_npu.xml")
    assert info.requires_feature("android.hardware.npu")
    assert pm.hasSystemFeature("android.hardware.npu")
    assert not pm.hasSystemFeature("android.hardware.nfc")


def test_only_required_features_refuse(tmp_path):
    pm = PackageManager(system_features=())
    info = pm.installPackage(APPS / "camera")
    assert not pm.hasSystemFeature(FEATURE_NEURAL_PROCESSING_UNIT)
    assert info.declares_feature(FEATURE_NEURAL_PROCESSING_UNIT)
    # full.xml requires android.hardware.camera (required defaults to true).
    with pytest.raises(PackageManagerException, match="android.hardware.camera") as e:
        pm.installPackage(FIXTURES / "full.xml")
    assert "autofocus" not in str(e.value)  # optional features are not listed as missing


def test_a_min_sdk_above_the_device_is_refused(tmp_path):
    pm = PackageManager(sdk_int=33)
    with pytest.raises(PackageManagerException, match="minSdkVersion 34") as info:
        pm.installPackage(write_app(tmp_path, "new", '<uses-sdk android:minSdkVersion="34" />'))
    assert info.value.error_code == INSTALL_FAILED_OLDER_SDK


def test_a_version_downgrade_is_refused_unless_allowed(tmp_path):
    pm = PackageManager()
    pm.installPackage(write_app(tmp_path / "v5", "app", "", attrs='android:versionCode="5"'))
    old = write_app(tmp_path / "v4", "app", "", attrs='android:versionCode="4"')
    with pytest.raises(PackageManagerException) as info:
        pm.installPackage(old)
    assert info.value.error_code == INSTALL_FAILED_VERSION_DOWNGRADE
    assert pm.getPackageInfo("com.example.app").versionCode == 5
    assert pm.installPackage(old, allow_downgrade=True).versionCode == 4
    # The same version again is a plain reinstall.
    assert pm.installPackage(old).versionCode == 4


def test_install_errors_cross_the_binder_with_their_code():
    pm = PackageManager(system_features=())
    with pytest.raises(ServiceSpecificException) as info:
        pm.installPackage(FIXTURES / "requires_npu.xml")
    assert info.value.exception_code == EX_SERVICE_SPECIFIC
    assert info.value.error_code == INSTALL_FAILED_MISSING_FEATURE


def test_bad_constructor_arguments_are_refused():
    with pytest.raises(IllegalArgumentException, match="not one string"):
        PackageManager(system_features="android.hardware.npu")
    with pytest.raises(IllegalArgumentException, match="bad system feature name"):
        PackageManager(system_features={"npu"})
    with pytest.raises(IllegalArgumentException, match="sdk_int"):
        PackageManager(sdk_int=0)


# ---------------------------------------------------------------------- lookups


def test_lookups_by_package_and_by_uid(tmp_path):
    pm = PackageManager()
    info = pm.installPackage(APPS / "photos")
    assert pm.getPackageInfo("com.example.npuemu.photos") is info
    assert pm.getPackageInfoForUid(info.uid) is info
    assert pm.getPackageUid("com.example.npuemu.photos") == info.uid
    assert pm.getPackagesForUid(info.uid) == ["com.example.npuemu.photos"]
    assert pm.getNameForUid(info.uid) == "com.example.npuemu.photos"
    assert pm.getPackagesForUid(10999) == []
    assert (pm.getNameForUid(0), pm.getNameForUid(1000), pm.getNameForUid(2000), pm.getNameForUid(10999)) == (
        "root",
        "system",
        "shell",
        None,
    )
    with pytest.raises(NameNotFoundException, match="com.example.none") as e:
        pm.getPackageInfo("com.example.none")
    assert isinstance(e.value, LookupError) and isinstance(e.value, IllegalArgumentException)
    with pytest.raises(NameNotFoundException, match="uid 10999"):
        pm.getPackageInfoForUid(10999)
    with pytest.raises(IllegalArgumentException, match="a uid is an int"):
        pm.getPackagesForUid("10000")
    assert info.codePath == str(APPS / "photos")


# ------------------------------------------------------------------ permissions


def test_apps_hold_exactly_the_permissions_they_request():
    pm = PackageManager()
    needs = pm.installPackage(FIXTURES / "requires_npu.xml")
    rogue = pm.installPackage(APPS / "rogue")
    assert pm.checkPermission(PERMISSION_ACCESS_NPU_MODEL_MANAGER_API, needs.uid) == PERMISSION_GRANTED
    assert pm.checkPermission(PERMISSION_ATTRIBUTE_WORK_TO_OTHER_APPS, rogue.uid) == PERMISSION_DENIED
    assert pm.checkPermission("android.permission.CAMERA", rogue.uid) == PERMISSION_DENIED


def test_an_app_that_requests_attribution_holds_it():
    pm = PackageManager(system_features={"android.hardware.npu", "android.hardware.camera"})
    info = pm.installPackage(FIXTURES / "full.xml")
    assert pm.checkPermission(PERMISSION_ATTRIBUTE_WORK_TO_OTHER_APPS, info.uid) == PERMISSION_GRANTED


@pytest.mark.parametrize("uid", [0, 1000])
def test_root_and_system_hold_every_permission(uid):
    pm = PackageManager()
    for permission in (PERMISSION_ATTRIBUTE_WORK_TO_OTHER_APPS, PERMISSION_ACCESS_NPU_MODEL_MANAGER_API, "com.x.Y"):
        assert pm.checkPermission(permission, uid) == PERMISSION_GRANTED


def test_the_shell_may_dump_and_manage_but_not_attribute():
    pm = PackageManager()
    assert pm.checkPermission(PERMISSION_DUMP, 2000) == PERMISSION_GRANTED
    assert pm.checkPermission(PERMISSION_ACCESS_NPU_MODEL_MANAGER_API, 2000) == PERMISSION_GRANTED
    assert pm.checkPermission(PERMISSION_ATTRIBUTE_WORK_TO_OTHER_APPS, 2000) == PERMISSION_DENIED
    assert PackageManager(shell_permissions=()).checkPermission(PERMISSION_DUMP, 2000) == PERMISSION_DENIED


def test_unknown_and_uninstalled_uids_hold_nothing(tmp_path):
    pm = PackageManager()
    info = pm.installPackage(APPS / "camera")
    assert pm.checkPermission(PERMISSION_ACCESS_NPU_MODEL_MANAGER_API, 10999) == PERMISSION_DENIED
    assert pm.checkPermission(PERMISSION_ACCESS_NPU_MODEL_MANAGER_API, 1001) == PERMISSION_DENIED
    assert pm.checkPermission(PERMISSION_ACCESS_NPU_MODEL_MANAGER_API, -1) == PERMISSION_DENIED
    pm.deletePackage(info.packageName)
    assert pm.checkPermission(PERMISSION_ACCESS_NPU_MODEL_MANAGER_API, info.uid) == PERMISSION_DENIED


def test_permission_results_compare_like_android_and_test_true_only_when_granted():
    assert PERMISSION_GRANTED == 0 and PERMISSION_DENIED == -1
    assert PackageManager.PERMISSION_GRANTED is PERMISSION_GRANTED
    # Plain ints would make `if checkPermission(...)` grant the denied; these do not.
    assert bool(PERMISSION_GRANTED) is True
    assert bool(PERMISSION_DENIED) is False


def test_enforce_permission_raises_security_exception():
    pm = PackageManager()
    rogue = pm.installPackage(APPS / "rogue")
    pm.enforcePermission(PERMISSION_ACCESS_NPU_MODEL_MANAGER_API, rogue.uid)
    with pytest.raises(SecurityException, match=r"attribute: uid 10000 \(com.example.npuemu.rogue\) does not hold"):
        pm.enforcePermission(PERMISSION_ATTRIBUTE_WORK_TO_OTHER_APPS, rogue.uid, "attribute")
    with pytest.raises(PermissionError):
        pm.enforcePermission(PERMISSION_ACCESS_NPU_MODEL_MANAGER_API, 10999)


@pytest.mark.parametrize("permission, uid", [("", 10000), (None, 10000), (PERMISSION_DUMP, "10000"), (PERMISSION_DUMP, True)])
def test_bad_permission_queries_are_clear_errors(permission, uid):
    with pytest.raises(IllegalArgumentException):
        PackageManager().checkPermission(permission, uid)


# -------------------------------------------------------------------------- dump


def test_dump_is_plain_data_for_dumpsys(tmp_path):
    pm = PackageManager(system_features={"android.hardware.npu"})
    camera = pm.installPackage(APPS / "camera")
    legacy = pm.installPackage(APPS / "legacy")
    pm.deletePackage(legacy.packageName)
    data = pm.dump()
    assert json.loads(json.dumps(data)) == data
    assert msgpack.unpackb(msgpack.packb(data), strict_map_key=False) == data
    assert data["system_features"] == ["android.hardware.npu"]
    assert data["sdk_int"] == 37
    [row] = data["packages"]
    assert row["packageName"] == camera.packageName
    assert row["uid"] == 10000
    assert row["grantedPermissions"] == sorted(camera.requestedPermissions)
    assert row["reqFeatures"] == [
        {"name": "android.hardware.npu", "required": False},
        {"name": "android.hardware.camera", "required": False},
    ]
    assert data["uids"] == [
        {"uid": 10000, "packageName": "com.example.npuemu.camera", "installed": True},
        {"uid": 10001, "packageName": "com.example.npuemu.legacy", "installed": False},
    ]


def test_a_fifo_planted_as_the_manifest_does_not_hang_the_parser(tmp_path):
    folder = tmp_path / "app"
    folder.mkdir()
    os.mkfifo(folder / "AndroidManifest.xml")
    with pytest.raises(PackageParserException) as info:
        parse_manifest(folder)
    assert str(info.value) == f"{folder / 'AndroidManifest.xml'}: not a regular file, not a manifest (INSTALL_PARSE_FAILED_NOT_APK)"


def test_a_device_file_is_not_read_as_a_manifest(tmp_path):
    folder = tmp_path / "app"
    folder.mkdir()
    (folder / "AndroidManifest.xml").symlink_to("/dev/zero")
    with pytest.raises(PackageParserException) as info:
        parse_manifest(folder)
    assert str(info.value) == f"{folder / 'AndroidManifest.xml'}: not a regular file, not a manifest (INSTALL_PARSE_FAILED_NOT_APK)"


def test_a_folder_named_like_the_manifest_is_refused(tmp_path):
    (tmp_path / "app" / "AndroidManifest.xml").mkdir(parents=True)
    with pytest.raises(PackageParserException) as info:
        parse_manifest(tmp_path / "app")
    manifest = tmp_path / "app" / "AndroidManifest.xml"
    assert str(info.value) == f"{manifest}: a folder, not a manifest (INSTALL_PARSE_FAILED_NOT_APK)"


# ------------------------------------------------------------------------ fuzzing

_SEED = (APPS / "camera" / "AndroidManifest.xml").read_bytes()


def _app_holding(tmp_path_factory, data: bytes) -> Path:
    # One folder for every example: the manifest is rewritten each time.
    folder = tmp_path_factory.getbasetemp() / "fuzz"
    folder.mkdir(exist_ok=True)
    (folder / "AndroidManifest.xml").write_bytes(data)
    return folder


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(st.binary(max_size=2048), st.text(max_size=512).map(lambda t: t.encode("utf-8", "surrogatepass"))))
def test_any_bytes_are_a_manifest_or_a_parser_exception(tmp_path_factory, data):
    folder = _app_holding(tmp_path_factory, data)
    try:
        parsed = parse_manifest(folder)
    except PackageParserException as e:
        assert str(folder) in str(e) and "\n" not in str(e)
    else:
        validate_package_name(parsed.packageName)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    edits=st.lists(
        st.tuples(st.integers(0, len(_SEED) - 1), st.sampled_from([b"", b"<", b">", b'"', b"&", b"=", b":", b"x", b"\x00", b"\xff", b"!"])),
        min_size=1,
        max_size=6,
    )
)
def test_mutated_real_manifests_parse_or_fail_cleanly(tmp_path_factory, edits):
    data = bytearray(_SEED)
    for position, replacement in edits:
        position = min(position, len(data) - 1)
        data[position : position + 1] = replacement
    folder = _app_holding(tmp_path_factory, bytes(data))
    try:
        parsed = parse_manifest(folder)
    except PackageParserException as e:
        assert str(folder) in str(e) and "\n" not in str(e)
    else:
        validate_package_name(parsed.packageName)
        assert all(isinstance(p, str) for p in parsed.requestedPermissions)


def test_the_npu_names_are_androids_exact_strings():
    assert FEATURE_NEURAL_PROCESSING_UNIT == "android.hardware.npu"
    assert PERMISSION_ACCESS_NPU_MODEL_MANAGER_API == "android.permission.ACCESS_NPU_MODEL_MANAGER_API"
    assert PERMISSION_ATTRIBUTE_WORK_TO_OTHER_APPS == "android.permission.ATTRIBUTE_WORK_TO_OTHER_APPS"
