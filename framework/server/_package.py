"""The package manager: manifests, installed packages, uids and permissions.

This is the pure half of system_server's ``package`` service: it reads an app's
``AndroidManifest.xml``, decides whether the app may be installed on this device,
gives it a uid, and answers the questions other services ask ("which package is uid
10003?", "does it hold ACCESS_NPU_MODEL_MANAGER_API?", "does it declare the NPU
feature?"). It does no I/O beyond reading the manifest file it is pointed at, and
knows nothing of the binder: a later layer serves it.

What is read from a manifest, and how
=====================================

Attributes in the ``android:`` namespace (``http://schemas.android.com/apk/res/android``)
and the root's plain ``package`` attribute, as Android's package parser reads them::

    <manifest package="com.example.camera" android:versionCode="3" android:versionName="1.2">
        <uses-sdk android:minSdkVersion="29" android:targetSdkVersion="37" />
        <uses-feature android:name="android.hardware.npu" android:required="false" />
        <uses-permission android:name="android.permission.ACCESS_NPU_MODEL_MANAGER_API" />
        <application android:label="Camera">
            <meta-data android:name="npuemu.launch.importance" android:value="foreground" />
        </application>
    </manifest>

* ``package`` is required and must be a Java-style name with at least two segments,
  each starting with a letter (Android's rule), at most 255 characters.
* ``android:versionCode`` defaults to 0; decimal or ``0x`` hex, 0..2**31-1.
* ``minSdkVersion`` defaults to 1 and ``targetSdkVersion`` to ``minSdkVersion``, as on
  Android. An app whose ``minSdkVersion`` is above the device's SDK level is refused
  (``INSTALL_FAILED_OLDER_SDK``).
* ``<uses-feature android:required>`` defaults to **true**, as on Android. The seed's
  NPU declaration says ``required="false"``: the app *uses* the NPU when there is one
  and still installs where there is none. A feature an app requires that the device
  lacks refuses the install (``INSTALL_FAILED_MISSING_FEATURE``). A ``<uses-feature>``
  with only ``android:glEsVersion`` is accepted and ignored: the emulator has no GPU.
  The same feature declared twice is required if either declaration requires it.
* ``<uses-permission>`` and ``<uses-permission-sdk-23>`` name a permission each;
  duplicates collapse, order is kept.
* ``<application android:label>`` is kept verbatim (there are no resources to resolve
  ``@string/...`` against); ``<meta-data android:name android:value>`` inside it is
  collected into ``PackageInfo.metaData``. npuemu reads one key, documented in
  ``framework.server._activity``: ``npuemu.launch.importance``.
* Unknown elements and attributes are ignored, as Android ignores them.

Safety: the manifest is parsed with defusedxml's SAX reader with DTDs forbidden, so a
``<!DOCTYPE>`` of any kind, entity declarations (the "billion laughs") and external
entities or DTDs (``file:///etc/passwd``, ``http://...``) are all refused before
anything is expanded or fetched, with one ``UnsafeManifestException`` naming the file.
Only a regular file is read (a FIFO or a device planted as the manifest cannot hang
system_server), and no more than ``MAX_MANIFEST_BYTES`` of it. Every other problem is a
``PackageParserException`` whose message starts with the file and, where known, the
line: ``apps/x/AndroidManifest.xml:4: <uses-feature> has no android:name``.

Permissions
===========

Every permission an app requests is granted at install, as Android grants normal
permissions: npuemu has no signatures, so "signature" permissions such as
``ATTRIBUTE_WORK_TO_OTHER_APPS`` are held exactly by the apps that ask for them (which
is what lets the sample ``rogue`` app be refused by *not* asking). Root (uid 0) and
system (uid 1000) hold every permission. The shell (uid 2000, the person at the
terminal) holds a short fixed list, ``SHELL_PERMISSIONS``, enough for ``dumpsys`` and
``cmd npu``. Everyone else holds nothing.

Where npuemu differs from Android
=================================

* A package keeps its uid for the life of the PackageManager, even across
  ``deletePackage`` and a later install: logs and traces stay readable. Android
  hands out a fresh uid after an uninstall.
* Only the uids persist. Given a ``settings`` file (``packages.xml`` in the emulator's
  data directory, as Android keeps ``/data/system/packages.xml``), every uid handed
  out is written there at once (a new file, synced, then renamed over the old: a crash
  leaves the old or the new, never half of one) and read back at the next boot (with
  defusedxml, no DTD, at most ``MAX_SETTINGS_BYTES``), so a package keeps its uid across
  boots; ``npuemu boot --wipe-data`` forgets them. A file that is not one this wrote is
  set aside as ``packages.xml.bad`` with a warning, and uids start afresh; what was
  installed is not kept (system_server installs the apps again at boot or launch).
* There is one user (user 0), so a uid is an app id plus nothing.
* ``checkPermission(permission, uid)`` takes a uid, like ``IPackageManager.checkUidPermission``
  (``PackageManager.checkPermission`` on Android takes a package name).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import io
import logging
import os
import tempfile
import re
import stat
import xml.sax
import xml.sax.handler
import xml.sax.saxutils
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from defusedxml import DefusedXmlException, DTDForbidden, EntitiesForbidden, ExternalReferenceForbidden
from defusedxml import ElementTree as _defused_etree
from defusedxml import expatreader as _defused_expatreader

from framework.binder import (
    AID_ROOT,
    AID_SHELL,
    AID_SYSTEM,
    FIRST_APPLICATION_UID,
    LAST_APPLICATION_UID,
    IllegalArgumentException,
    SecurityException,
    ServiceSpecificException,
)
from framework.npumanager import (
    ACCESS_NPU_MODEL_MANAGER_API as _ACCESS_NPU_MODEL_MANAGER_API,
    ATTRIBUTE_WORK_TO_OTHER_APPS as _ATTRIBUTE_WORK_TO_OTHER_APPS,
    FEATURE_NEURAL_PROCESSING_UNIT as _FEATURE_NEURAL_PROCESSING_UNIT,
)

__all__ = [
    "ANDROID_NAMESPACE",
    "FEATURE_NEURAL_PROCESSING_UNIT",
    "PERMISSION_ACCESS_NPU_MODEL_MANAGER_API",
    "PERMISSION_ATTRIBUTE_WORK_TO_OTHER_APPS",
    "PERMISSION_DUMP",
    "DEVICE_SDK_INT",
    "MAX_MANIFEST_BYTES",
    "MAX_SETTINGS_BYTES",
    "PackageSettingsError",
    "read_package_uids",
    "write_package_uids",
    "SHELL_PERMISSIONS",
    "PermissionResult",
    "PERMISSION_GRANTED",
    "PERMISSION_DENIED",
    "FeatureInfo",
    "ParsedPackage",
    "PackageInfo",
    "PackageManager",
    "PackageManagerException",
    "PackageParserException",
    "UnsafeManifestException",
    "NameNotFoundException",
    "parse_manifest",
    "validate_package_name",
    "INSTALL_FAILED_OLDER_SDK",
    "INSTALL_FAILED_MISSING_FEATURE",
    "INSTALL_FAILED_VERSION_DOWNGRADE",
    "INSTALL_PARSE_FAILED_NOT_APK",
    "INSTALL_PARSE_FAILED_BAD_MANIFEST",
    "INSTALL_PARSE_FAILED_BAD_PACKAGE_NAME",
    "INSTALL_PARSE_FAILED_MANIFEST_MALFORMED",
    "INSTALL_PARSE_FAILED_MANIFEST_EMPTY",
    "INSTALL_FAILED_INTERNAL_ERROR",
]

ANDROID_NAMESPACE = "http://schemas.android.com/apk/res/android"
MANIFEST_FILENAME = "AndroidManifest.xml"

# PackageManager.FEATURE_NEURAL_PROCESSING_UNIT (API 37, "android.hardware.npu") and the
# exact permission strings AOSP's NpuManager module checks (NpuManagerServiceImpl and
# PriorityManager use android.Manifest.permission.ACCESS_NPU_MODEL_MANAGER_API and
# ATTRIBUTE_WORK_TO_OTHER_APPS): defined once, with the app API's constants.
FEATURE_NEURAL_PROCESSING_UNIT = _FEATURE_NEURAL_PROCESSING_UNIT
PERMISSION_ACCESS_NPU_MODEL_MANAGER_API = _ACCESS_NPU_MODEL_MANAGER_API
PERMISSION_ATTRIBUTE_WORK_TO_OTHER_APPS = _ATTRIBUTE_WORK_TO_OTHER_APPS
PERMISSION_DUMP = "android.permission.DUMP"

# Android 17 (VERSION_CODES.CINNAMON_BUN), the release that brings the NPU Manager.
DEVICE_SDK_INT = 37

# Real manifests are a few kilobytes; anything this large is a mistake or an attack.
MAX_MANIFEST_BYTES = 1 << 20
#: The largest ``packages.xml`` read back (every app uid's line fits many times over).
MAX_SETTINGS_BYTES = 4 << 20

# What `adb shell` may do here: dump services and drive `cmd npu` (setPolicy checks
# ACCESS_NPU_MODEL_MANAGER_API, as AOSP's NpuManagerServiceImpl does). It is not an app
# and not system, so it may not attribute work to other uids.
SHELL_PERMISSIONS = frozenset({PERMISSION_DUMP, PERMISSION_ACCESS_NPU_MODEL_MANAGER_API})

# android.content.pm.PackageManager install and parse results.
INSTALL_FAILED_OLDER_SDK = -12
INSTALL_FAILED_MISSING_FEATURE = -17
INSTALL_FAILED_VERSION_DOWNGRADE = -25
INSTALL_PARSE_FAILED_NOT_APK = -100
INSTALL_PARSE_FAILED_BAD_MANIFEST = -101
INSTALL_PARSE_FAILED_BAD_PACKAGE_NAME = -106
INSTALL_PARSE_FAILED_MANIFEST_MALFORMED = -108
INSTALL_PARSE_FAILED_MANIFEST_EMPTY = -109
INSTALL_FAILED_INTERNAL_ERROR = -110

_INSTALL_RESULT_NAMES = {
    INSTALL_FAILED_OLDER_SDK: "INSTALL_FAILED_OLDER_SDK",
    INSTALL_FAILED_MISSING_FEATURE: "INSTALL_FAILED_MISSING_FEATURE",
    INSTALL_FAILED_VERSION_DOWNGRADE: "INSTALL_FAILED_VERSION_DOWNGRADE",
    INSTALL_PARSE_FAILED_NOT_APK: "INSTALL_PARSE_FAILED_NOT_APK",
    INSTALL_PARSE_FAILED_BAD_MANIFEST: "INSTALL_PARSE_FAILED_BAD_MANIFEST",
    INSTALL_PARSE_FAILED_BAD_PACKAGE_NAME: "INSTALL_PARSE_FAILED_BAD_PACKAGE_NAME",
    INSTALL_PARSE_FAILED_MANIFEST_MALFORMED: "INSTALL_PARSE_FAILED_MANIFEST_MALFORMED",
    INSTALL_PARSE_FAILED_MANIFEST_EMPTY: "INSTALL_PARSE_FAILED_MANIFEST_EMPTY",
    INSTALL_FAILED_INTERNAL_ERROR: "INSTALL_FAILED_INTERNAL_ERROR",
}

_MAX_PACKAGE_NAME = 255
_PACKAGE_SEGMENT = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
# Feature and permission names: dotted identifiers, as every real one is.
_DOTTED_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+\Z")
_INT32_MAX = 2**31 - 1


# --------------------------------------------------------------------------- errors


class PackageManagerException(ServiceSpecificException):
    """An install or lookup failed; ``error_code`` is Android's ``INSTALL_*`` result.

    It is a ``ServiceSpecificException`` so that, served over the binder, the code
    reaches the caller intact (``EX_SERVICE_SPECIFIC`` carries it), as ``pm install``
    reports ``Failure [INSTALL_FAILED_MISSING_FEATURE: ...]``. ``str()`` is the message
    alone, which already names the file and the result.
    """

    def __init__(self, error_code: int, message: str = "", *, path: str | os.PathLike | None = None) -> None:
        super().__init__(error_code, message)
        self.path = None if path is None else str(path)

    @property
    def error_name(self) -> str:
        return _INSTALL_RESULT_NAMES.get(self.error_code, str(self.error_code))

    def __str__(self) -> str:
        return self.message


class PackageParserException(PackageManagerException, ValueError):
    """The manifest cannot be read, is not XML, or says something malformed."""


class UnsafeManifestException(PackageParserException):
    """The manifest declares a DTD, entities or external references: refused unexpanded."""


class NameNotFoundException(IllegalArgumentException, LookupError):
    """No installed package has that name or uid (``PackageManager.NameNotFoundException``)."""


class _ParseFailure(Exception):
    """Raised inside the parser; carries what ``parse_manifest`` turns into a message."""

    def __init__(self, error_code: int, line: int | None, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.line = line
        self.message = message


# ----------------------------------------------------------------------- data types


class PermissionResult(enum.IntEnum):
    """``PackageManager.PERMISSION_GRANTED`` (0) / ``PERMISSION_DENIED`` (-1).

    The values are Android's, so ``result == PERMISSION_GRANTED`` reads as it does in
    Java. Truthiness follows the meaning, not the number: ``bool(PERMISSION_GRANTED)`` is
    True and ``bool(PERMISSION_DENIED)`` is False, so ``if pm.checkPermission(...)`` does
    the safe thing too (with plain ints it would grant exactly the wrong callers).
    """

    GRANTED = 0
    DENIED = -1

    def __bool__(self) -> bool:
        return self is PermissionResult.GRANTED


PERMISSION_GRANTED = PermissionResult.GRANTED
PERMISSION_DENIED = PermissionResult.DENIED


@dataclass(frozen=True, slots=True)
class FeatureInfo:
    """One ``<uses-feature>``: its name and whether the app refuses to run without it."""

    name: str
    required: bool = True


@dataclass(frozen=True, slots=True)
class ParsedPackage:
    """What a manifest says, before installation gives it a uid.

    Field names are Android's (``PackageInfo``/``ApplicationInfo``), flattened into one
    record: there is no separate ``applicationInfo``.
    """

    packageName: str
    versionCode: int
    versionName: str | None
    minSdkVersion: int
    targetSdkVersion: int
    label: str | None
    reqFeatures: tuple[FeatureInfo, ...]
    requestedPermissions: tuple[str, ...]
    # A read-only mapping; left out of hash() (a mapping has none) but not of ==.
    metaData: Mapping[str, str] = dataclasses.field(hash=False)
    manifestPath: str

    @property
    def codePath(self) -> str:
        """The app's folder (where its ``main.py`` lives)."""
        return os.path.dirname(self.manifestPath)

    def declares_feature(self, name: str) -> bool:
        """True if the manifest has ``<uses-feature android:name=name>``, required or not.

        This is AOSP's ``doesPackageUseNpuFeature`` for ``android.hardware.npu``: a
        declaration with ``required="false"`` counts.
        """
        return any(f.name == name for f in self.reqFeatures)

    def requires_feature(self, name: str) -> bool:
        return any(f.name == name and f.required for f in self.reqFeatures)

    def to_dict(self) -> dict:
        """Plain data (str, int, bool, None, lists, dicts), fit for msgpack or JSON."""
        return {
            "packageName": self.packageName,
            "versionCode": self.versionCode,
            "versionName": self.versionName,
            "minSdkVersion": self.minSdkVersion,
            "targetSdkVersion": self.targetSdkVersion,
            "label": self.label,
            "reqFeatures": [{"name": f.name, "required": f.required} for f in self.reqFeatures],
            "requestedPermissions": list(self.requestedPermissions),
            "metaData": dict(self.metaData),
            "manifestPath": self.manifestPath,
            "codePath": self.codePath,
        }


@dataclass(frozen=True, slots=True)
class PackageInfo(ParsedPackage):
    """An installed package: the parsed manifest plus its uid and what it was granted."""

    uid: int = -1
    grantedPermissions: frozenset[str] = frozenset()

    def to_dict(self) -> dict:
        data = ParsedPackage.to_dict(self)
        data["uid"] = self.uid
        data["grantedPermissions"] = sorted(self.grantedPermissions)
        return data


# -------------------------------------------------------------------------- parsing


def validate_package_name(name: str) -> str:
    """Return ``name`` if it is a valid Android package name, else raise ValueError.

    Android's rule (``FrameworkParsingPackageUtils.validateName``): segments separated by
    dots, at least two of them, each starting with an ASCII letter and continuing with
    letters, digits or underscores.
    """
    if not isinstance(name, str) or not name:
        raise ValueError("the package name is empty")
    if len(name) > _MAX_PACKAGE_NAME:
        raise ValueError(f"the package name is {len(name)} characters long (at most {_MAX_PACKAGE_NAME})")
    segments = name.split(".")
    if len(segments) < 2:
        raise ValueError(f"bad package name {name!r}: it needs at least one '.' separator, as in com.example.app")
    for segment in segments:
        if not _PACKAGE_SEGMENT.match(segment):
            raise ValueError(
                f"bad package name {name!r}: segment {segment!r} must start with a letter "
                "and contain only letters, digits and '_'"
            )
    return name


@dataclass(slots=True)
class _Element:
    uri: str
    tag: str
    attrs: dict[tuple[str, str], str]
    line: int
    children: list[_Element] = dataclasses.field(default_factory=list)

    def android(self, name: str) -> str | None:
        return self.attrs.get((ANDROID_NAMESPACE, name))

    def misplaced(self, name: str) -> str | None:
        """The namespace ``name`` was written in, if it is not the android one."""
        for uri, local in self.attrs:
            if local == name and uri != ANDROID_NAMESPACE:
                return uri
        return None


class _TreeBuilder(xml.sax.handler.ContentHandler):
    """Builds a tiny element tree that remembers each element's line (for messages)."""

    def __init__(self) -> None:
        super().__init__()
        self._locator = None
        self.root: _Element | None = None
        self._stack: list[_Element] = []

    def setDocumentLocator(self, locator) -> None:
        self._locator = locator

    def startElementNS(self, name, qname, attrs) -> None:
        uri, local = name
        line = self._locator.getLineNumber() if self._locator is not None else 0
        element = _Element(uri or "", local, {(u or "", n): v for (u, n), v in attrs.items()}, line)
        if self._stack:
            self._stack[-1].children.append(element)
        else:
            self.root = element
        self._stack.append(element)

    def endElementNS(self, name, qname) -> None:
        self._stack.pop()


def _read_manifest_bytes(path: Path) -> bytes:
    try:
        # O_NONBLOCK, then fstat: a FIFO or a device planted as the manifest must not
        # hang system_server in open() or read(); only a regular file is read.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                kind = "a folder" if stat.S_ISDIR(os.fstat(fd).st_mode) else "not a regular file"
                raise PackageParserException(
                    INSTALL_PARSE_FAILED_NOT_APK, f"{path}: {kind}, not a manifest (INSTALL_PARSE_FAILED_NOT_APK)", path=path
                )
            chunks: list[bytes] = []
            size = 0
            while size <= MAX_MANIFEST_BYTES:
                chunk = os.read(fd, MAX_MANIFEST_BYTES + 1 - size)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            data = b"".join(chunks)
        finally:
            os.close(fd)
    except PackageParserException:
        raise
    except FileNotFoundError:
        raise PackageParserException(
            INSTALL_PARSE_FAILED_NOT_APK, f"{path}: no such file (INSTALL_PARSE_FAILED_NOT_APK)", path=path
        ) from None
    except OSError as e:
        raise PackageParserException(
            INSTALL_PARSE_FAILED_NOT_APK,
            f"{path}: cannot be read: {e.strerror or e} (INSTALL_PARSE_FAILED_NOT_APK)",
            path=path,
        ) from None
    except ValueError as e:  # a NUL byte in the path
        raise PackageParserException(
            INSTALL_PARSE_FAILED_NOT_APK, f"{str(path)!r} is not a usable path: {e} (INSTALL_PARSE_FAILED_NOT_APK)"
        ) from None
    if len(data) > MAX_MANIFEST_BYTES:
        raise PackageParserException(
            INSTALL_PARSE_FAILED_BAD_MANIFEST,
            f"{path}: larger than {MAX_MANIFEST_BYTES} bytes; refused before parsing (INSTALL_PARSE_FAILED_BAD_MANIFEST)",
            path=path,
        )
    if not data.strip():
        raise PackageParserException(
            INSTALL_PARSE_FAILED_MANIFEST_EMPTY, f"{path}: the file is empty (INSTALL_PARSE_FAILED_MANIFEST_EMPTY)", path=path
        )
    return data


def _parse_xml(data: bytes, path: Path) -> _Element:
    builder = _TreeBuilder()
    parser = _defused_expatreader.create_parser(
        namespaceHandling=1, forbid_dtd=True, forbid_entities=True, forbid_external=True
    )
    parser.setContentHandler(builder)
    source = xml.sax.InputSource(str(path))
    source.setByteStream(io.BytesIO(data))
    unsafe = (
        "npuemu refuses DTDs, entity declarations and external entities in manifests "
        "(they are how entity-expansion and external-entity attacks begin)"
    )
    try:
        parser.parse(source)
    except DTDForbidden as e:
        what = f"<!DOCTYPE {e.name}>"
        if e.sysid:
            what += f" with the external DTD {e.sysid!r}"
        raise UnsafeManifestException(
            INSTALL_PARSE_FAILED_BAD_MANIFEST,
            f"{path}: refused: the manifest declares a DTD {what}; {unsafe} (INSTALL_PARSE_FAILED_BAD_MANIFEST)",
            path=path,
        ) from None
    except EntitiesForbidden as e:
        raise UnsafeManifestException(
            INSTALL_PARSE_FAILED_BAD_MANIFEST,
            f"{path}: refused: the manifest declares the entity {e.name!r}; {unsafe} (INSTALL_PARSE_FAILED_BAD_MANIFEST)",
            path=path,
        ) from None
    except ExternalReferenceForbidden as e:
        raise UnsafeManifestException(
            INSTALL_PARSE_FAILED_BAD_MANIFEST,
            f"{path}: refused: the manifest refers to the external entity {e.sysid!r}; {unsafe} "
            "(INSTALL_PARSE_FAILED_BAD_MANIFEST)",
            path=path,
        ) from None
    except DefusedXmlException as e:  # any other refusal defusedxml may add later
        raise UnsafeManifestException(
            INSTALL_PARSE_FAILED_BAD_MANIFEST, f"{path}: refused: {e}; {unsafe} (INSTALL_PARSE_FAILED_BAD_MANIFEST)", path=path
        ) from None
    except xml.sax.SAXParseException as e:
        reason = e.getMessage()
        hint = ""
        if "unbound prefix" in reason:
            hint = f'; declare xmlns:android="{ANDROID_NAMESPACE}" on <manifest>'
        raise PackageParserException(
            INSTALL_PARSE_FAILED_BAD_MANIFEST,
            f"{path}:{e.getLineNumber()}:{e.getColumnNumber() + 1}: not well-formed XML: {reason}{hint} "
            "(INSTALL_PARSE_FAILED_BAD_MANIFEST)",
            path=path,
        ) from None
    except xml.sax.SAXException as e:
        raise PackageParserException(
            INSTALL_PARSE_FAILED_BAD_MANIFEST, f"{path}: not XML: {e.getMessage()} (INSTALL_PARSE_FAILED_BAD_MANIFEST)", path=path
        ) from None
    except (ValueError, LookupError) as e:
        # expat raises these for input it cannot even decode (an unknown encoding name).
        raise PackageParserException(
            INSTALL_PARSE_FAILED_BAD_MANIFEST, f"{path}: not XML: {e} (INSTALL_PARSE_FAILED_BAD_MANIFEST)", path=path
        ) from None
    assert builder.root is not None  # expat reports "no element found" otherwise
    return builder.root


def _malformed(element: _Element, message: str) -> _ParseFailure:
    return _ParseFailure(INSTALL_PARSE_FAILED_MANIFEST_MALFORMED, element.line, message)


def _android_attr(element: _Element, name: str, *, required: bool = False) -> str | None:
    value = element.android(name)
    if value is None and required:
        elsewhere = element.misplaced(name)
        if elsewhere == "":
            hint = f"; it has {name}= without the android: prefix"
        elif elsewhere is not None:
            hint = f"; its {name} is in the namespace {elsewhere!r}, not {ANDROID_NAMESPACE!r}"
        else:
            hint = ""
        raise _malformed(element, f"<{element.tag}> has no android:{name}{hint}")
    return value


def _int_attr(element: _Element, name: str, *, default: int, minimum: int) -> int:
    raw = _android_attr(element, name)
    if raw is None:
        return default
    text = raw.strip()
    try:
        value = int(text, 16) if text.lower().startswith("0x") else int(text, 10)
    except ValueError:
        raise _malformed(element, f"<{element.tag}> android:{name}={raw!r} is not an integer") from None
    if not minimum <= value <= _INT32_MAX:
        raise _malformed(element, f"<{element.tag}> android:{name}={value} is out of range ({minimum}..{_INT32_MAX})")
    return value


def _bool_attr(element: _Element, name: str, *, default: bool) -> bool:
    raw = _android_attr(element, name)
    if raw is None:
        return default
    # Android resource booleans are the words true/false, in any case.
    text = raw.strip().lower()
    if text == "true":
        return True
    if text == "false":
        return False
    raise _malformed(element, f'<{element.tag}> android:{name}={raw!r} must be "true" or "false"')


def _dotted_name_attr(element: _Element, what: str) -> str:
    name = _android_attr(element, "name", required=True).strip()
    if not _DOTTED_NAME.match(name):
        raise _malformed(element, f"<{element.tag}> android:name={name!r} is not a valid {what} name (like android.hardware.npu)")
    return name


def _interpret(root: _Element, path: Path) -> ParsedPackage:
    if root.tag != "manifest" or root.uri:
        shown = f"{{{root.uri}}}{root.tag}" if root.uri else root.tag
        raise _ParseFailure(
            INSTALL_PARSE_FAILED_MANIFEST_MALFORMED, root.line, f"the root element is <{shown}>, expected <manifest>"
        )
    package = root.attrs.get(("", "package"))
    if package is None:
        hint = "; it is a plain attribute, not android:package" if root.android("package") is not None else ""
        raise _ParseFailure(INSTALL_PARSE_FAILED_BAD_PACKAGE_NAME, root.line, f"<manifest> has no package attribute{hint}")
    try:
        package = validate_package_name(package.strip())
    except ValueError as e:
        raise _ParseFailure(INSTALL_PARSE_FAILED_BAD_PACKAGE_NAME, root.line, str(e)) from None

    version_code = _int_attr(root, "versionCode", default=0, minimum=0)
    version_name = _android_attr(root, "versionName")

    min_sdk = 1
    target_sdk: int | None = None
    features: dict[str, bool] = {}
    permissions: dict[str, None] = {}
    label: str | None = None
    meta_data: dict[str, str] = {}
    seen_sdk = seen_application = False

    for child in root.children:
        if child.uri:
            continue
        if child.tag == "uses-sdk":
            if seen_sdk:
                raise _malformed(child, "<manifest> has more than one <uses-sdk>")
            seen_sdk = True
            min_sdk = _int_attr(child, "minSdkVersion", default=1, minimum=1)
            if child.android("targetSdkVersion") is not None:
                target_sdk = _int_attr(child, "targetSdkVersion", default=min_sdk, minimum=1)
        elif child.tag == "uses-feature":
            if child.android("name") is None and child.android("glEsVersion") is not None:
                continue
            name = _dotted_name_attr(child, "feature")
            required = _bool_attr(child, "required", default=True)
            features[name] = features.get(name, False) or required
        elif child.tag in ("uses-permission", "uses-permission-sdk-23"):
            permissions[_dotted_name_attr(child, "permission")] = None
        elif child.tag == "application":
            if seen_application:
                raise _malformed(child, "<manifest> has more than one <application>")
            seen_application = True
            label = _android_attr(child, "label")
            for item in child.children:
                if item.tag != "meta-data" or item.uri:
                    continue
                key = _android_attr(item, "name", required=True).strip()
                if not key:
                    raise _malformed(item, "<meta-data> has an empty android:name")
                value = item.android("value")
                if value is not None:
                    meta_data[key] = value

    if target_sdk is None:
        target_sdk = min_sdk
    return ParsedPackage(
        packageName=package,
        versionCode=version_code,
        versionName=version_name,
        minSdkVersion=min_sdk,
        targetSdkVersion=target_sdk,
        label=label,
        reqFeatures=tuple(FeatureInfo(name, required) for name, required in features.items()),
        requestedPermissions=tuple(permissions),
        metaData=MappingProxyType(meta_data),
        # Absolute: the activity manager starts the app's process from this folder,
        # whatever the current directory of whoever installed it.
        manifestPath=os.path.abspath(path),
    )


def _manifest_path(location: str | os.PathLike) -> Path:
    try:
        path = Path(location)
        return path / MANIFEST_FILENAME if path.is_dir() else path
    except (TypeError, ValueError) as e:  # not a path at all, or one with a NUL byte
        raise PackageParserException(
            INSTALL_PARSE_FAILED_NOT_APK, f"{location!r} is not a usable path: {e} (INSTALL_PARSE_FAILED_NOT_APK)"
        ) from None


def parse_manifest(location: str | os.PathLike) -> ParsedPackage:
    """Parse an app's manifest: ``location`` is the app's folder or the manifest file.

    Raises ``UnsafeManifestException`` for DTDs, entities and external references, and
    ``PackageParserException`` for anything else wrong; each message names the file.
    """
    path = _manifest_path(location)
    data = _read_manifest_bytes(path)
    root = _parse_xml(data, path)
    try:
        return _interpret(root, path)
    except _ParseFailure as failure:
        where = f"{path}:{failure.line}" if failure.line else str(path)
        name = _INSTALL_RESULT_NAMES[failure.error_code]
        raise PackageParserException(failure.error_code, f"{where}: {failure.message} ({name})", path=path) from None


# -------------------------------------------------------------------------- manager


def _check_uid(uid: object) -> int:
    if isinstance(uid, bool) or not isinstance(uid, int):
        raise IllegalArgumentException(f"a uid is an int, not {type(uid).__name__} {uid!r}")
    return uid


def _check_permission_name(permission: object) -> str:
    if not isinstance(permission, str) or not permission:
        raise IllegalArgumentException(f"a permission is a non-empty string, not {permission!r}")
    return permission


class PackageSettingsError(ValueError):
    """``packages.xml`` is not a file :func:`write_package_uids` wrote (the message says where)."""


def read_package_uids(path: str | os.PathLike[str]) -> dict[str, int]:
    """The package -> uid records of ``packages.xml`` at ``path`` ({} if there is none).

    Raises :class:`PackageSettingsError` for a file that cannot be read, is too large, not well-formed
    XML, has a DTD or entities (defusedxml), or holds a bad name, a uid outside the
    application range, or a name or uid twice.
    """
    path = Path(path)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_SETTINGS_BYTES + 1)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise PackageSettingsError(f"{path}: cannot read it: {exc.strerror}") from None
    if len(data) > MAX_SETTINGS_BYTES:
        raise PackageSettingsError(f"{path}: over {MAX_SETTINGS_BYTES} bytes")
    try:
        root = _defused_etree.fromstring(data, forbid_dtd=True)
    except (DefusedXmlException, _defused_etree.ParseError) as exc:
        raise PackageSettingsError(f"{path}: {type(exc).__name__}: {exc}") from None
    if root.tag != "packages":
        raise PackageSettingsError(f"{path}: the root element is <{root.tag}>, not <packages>")
    uids: dict[str, int] = {}
    for item in root:
        if item.tag != "package":
            raise PackageSettingsError(f"{path}: unexpected <{item.tag}> in <packages>")
        name, uid_text = item.get("name"), item.get("userId")
        try:
            name = validate_package_name(name or "")
            uid = int(uid_text or "")
        except (ValueError, IllegalArgumentException) as exc:
            raise PackageSettingsError(f"{path}: a bad <package>: {exc}") from None
        if not FIRST_APPLICATION_UID <= uid <= LAST_APPLICATION_UID:
            raise PackageSettingsError(f"{path}: {name}'s userId {uid} is outside "
                                       f"{FIRST_APPLICATION_UID}..{LAST_APPLICATION_UID}")
        if name in uids or uid in uids.values():
            raise PackageSettingsError(f"{path}: {name} or userId {uid} appears twice")
        uids[name] = uid
    return uids


def write_package_uids(path: str | os.PathLike[str], uids: Mapping[str, int]) -> None:
    """Write ``packages.xml``: a new file in the same folder, synced, renamed over the old."""
    path = Path(path)
    lines = ['<?xml version="1.0" encoding="utf-8"?>', "<packages>"]
    for name, uid in sorted(uids.items(), key=lambda item: item[1]):
        lines.append(f"    <package name={xml.sax.saxutils.quoteattr(name)} userId=\"{int(uid)}\" />")
    lines.append("</packages>\n")
    fd, tmp = tempfile.mkstemp(prefix=".packages-", suffix=".xml", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)  # the rename itself survives a crash
    finally:
        os.close(dir_fd)


class PackageManager:
    """Installed packages, their uids and permissions, on one emulated device.

    ``system_features`` is what the device offers (``hasSystemFeature``): an emulator
    booted without an NPU driver passes a set without ``android.hardware.npu``, and apps
    that require it are refused. ``sdk_int`` is the device's API level. ``settings``
    is a ``packages.xml`` that keeps the uids across boots (see the module's doc).
    """

    log = logging.getLogger("PackageManager")

    PERMISSION_GRANTED = PERMISSION_GRANTED
    PERMISSION_DENIED = PERMISSION_DENIED
    FEATURE_NEURAL_PROCESSING_UNIT = FEATURE_NEURAL_PROCESSING_UNIT

    def __init__(
        self,
        system_features: Iterable[str] = (FEATURE_NEURAL_PROCESSING_UNIT,),
        *,
        sdk_int: int = DEVICE_SDK_INT,
        shell_permissions: Iterable[str] = SHELL_PERMISSIONS,
        settings: str | os.PathLike[str] | None = None,
    ) -> None:
        if isinstance(system_features, str):
            # A lone string would otherwise become a set of characters.
            raise IllegalArgumentException("system_features is a collection of feature names, not one string")
        features = frozenset(system_features)
        for name in features:
            if not isinstance(name, str) or not _DOTTED_NAME.match(name):
                raise IllegalArgumentException(f"bad system feature name {name!r} (expected a name like android.hardware.npu)")
        if isinstance(sdk_int, bool) or not isinstance(sdk_int, int) or sdk_int < 1:
            raise IllegalArgumentException(f"sdk_int must be a positive int, not {sdk_int!r}")
        self._features = features
        self._sdk_int = sdk_int
        self._shell_permissions = frozenset(_check_permission_name(p) for p in shell_permissions)
        self._packages: dict[str, PackageInfo] = {}  # installed, by package name
        self._by_uid: dict[int, str] = {}  # installed, uid -> package name
        self._uid_of: dict[str, int] = {}  # every package ever installed keeps its uid
        self._next_uid = FIRST_APPLICATION_UID
        self._settings = None if settings is None else Path(settings)
        if self._settings is not None:
            try:
                self._uid_of = read_package_uids(self._settings)
            except PackageSettingsError as exc:
                bad = self._settings.with_name(self._settings.name + ".bad")
                try:
                    os.replace(self._settings, bad)
                except OSError as err:
                    self.log.warning("%s; uids start afresh (it cannot be set aside: %s)", exc, err.strerror)
                else:
                    self.log.warning("%s; set aside as %s, uids start afresh", exc, bad.name)
            self._next_uid = max(self._uid_of.values(), default=FIRST_APPLICATION_UID - 1) + 1

    # --- the device

    @property
    def system_features(self) -> frozenset[str]:
        return self._features

    @property
    def sdk_int(self) -> int:
        return self._sdk_int

    def hasSystemFeature(self, name: str) -> bool:
        return name in self._features

    # --- install and remove

    def installPackage(self, location: str | os.PathLike, *, allow_downgrade: bool = False) -> PackageInfo:
        """Install the app at ``location`` (its folder, or its manifest), or replace it.

        A new package gets the next free uid from 10000 up, in install order; a package
        installed before keeps its uid. Refused, with nothing changed, when the manifest
        is unsafe or malformed, when it requires a feature the device lacks, when its
        ``minSdkVersion`` is above the device's, and when it would replace an installed
        version with a lower ``versionCode`` (unless ``allow_downgrade``, like
        ``adb install -d``).
        """
        parsed = parse_manifest(location)
        path = parsed.manifestPath
        missing = [f.name for f in parsed.reqFeatures if f.required and f.name not in self._features]
        if missing:
            names = ", ".join(missing)
            raise PackageManagerException(
                INSTALL_FAILED_MISSING_FEATURE,
                f"{path}: {parsed.packageName} requires the feature{'s' if len(missing) > 1 else ''} {names}, "
                f"which this device lacks (it has: {', '.join(sorted(self._features)) or 'none'}); "
                'declare it with android:required="false" to install anyway (INSTALL_FAILED_MISSING_FEATURE)',
                path=path,
            )
        if parsed.minSdkVersion > self._sdk_int:
            raise PackageManagerException(
                INSTALL_FAILED_OLDER_SDK,
                f"{path}: {parsed.packageName} needs minSdkVersion {parsed.minSdkVersion}, "
                f"the device is at {self._sdk_int} (INSTALL_FAILED_OLDER_SDK)",
                path=path,
            )
        current = self._packages.get(parsed.packageName)
        if current is not None and parsed.versionCode < current.versionCode and not allow_downgrade:
            raise PackageManagerException(
                INSTALL_FAILED_VERSION_DOWNGRADE,
                f"{path}: {parsed.packageName} versionCode {parsed.versionCode} is older than the installed "
                f"{current.versionCode} (INSTALL_FAILED_VERSION_DOWNGRADE)",
                path=path,
            )
        uid = self._uid_of.get(parsed.packageName)
        if uid is None:
            if self._next_uid > LAST_APPLICATION_UID:
                raise PackageManagerException(
                    INSTALL_FAILED_INTERNAL_ERROR,
                    f"{path}: no application uid left ({FIRST_APPLICATION_UID}..{LAST_APPLICATION_UID} are all taken) "
                    "(INSTALL_FAILED_INTERNAL_ERROR)",
                    path=path,
                )
            uid = self._next_uid
            if self._settings is not None:
                try:
                    write_package_uids(self._settings, {**self._uid_of, parsed.packageName: uid})
                except OSError as exc:
                    raise PackageManagerException(
                        INSTALL_FAILED_INTERNAL_ERROR,
                        f"{path}: cannot record {parsed.packageName}'s uid in {self._settings}: {exc.strerror}"
                        " (INSTALL_FAILED_INTERNAL_ERROR)",
                        path=path,
                    ) from None
            self._next_uid += 1
            self._uid_of[parsed.packageName] = uid
        info = PackageInfo(
            **{f.name: getattr(parsed, f.name) for f in dataclasses.fields(ParsedPackage)},
            uid=uid,
            grantedPermissions=frozenset(parsed.requestedPermissions),
        )
        self._packages[info.packageName] = info
        self._by_uid[uid] = info.packageName
        return info

    def deletePackage(self, packageName: str) -> PackageInfo:
        """Uninstall a package and return what it was. Its uid stays reserved for it."""
        info = self.getPackageInfo(packageName)
        del self._packages[packageName]
        del self._by_uid[info.uid]
        return info

    # --- lookups

    def getPackageInfo(self, packageName: str) -> PackageInfo:
        if not isinstance(packageName, str):
            raise IllegalArgumentException(f"a package name is a string, not {packageName!r}")
        info = self._packages.get(packageName)
        if info is None:
            raise NameNotFoundException(f"no package {packageName!r} is installed")
        return info

    def getPackageInfoForUid(self, uid: int) -> PackageInfo:
        name = self._by_uid.get(_check_uid(uid))
        if name is None:
            raise NameNotFoundException(f"no installed package has uid {uid}")
        return self._packages[name]

    def getPackageUid(self, packageName: str) -> int:
        return self.getPackageInfo(packageName).uid

    def getPackagesForUid(self, uid: int) -> list[str]:
        """The packages running as ``uid``: one for an app (no shared uids here), else empty."""
        name = self._by_uid.get(_check_uid(uid))
        return [] if name is None else [name]

    def getNameForUid(self, uid: int) -> str | None:
        """A name for any uid worth naming: the package, or root/system/shell; else None."""
        _check_uid(uid)
        if uid in self._by_uid:
            return self._by_uid[uid]
        return {AID_ROOT: "root", AID_SYSTEM: "system", AID_SHELL: "shell"}.get(uid)

    def getInstalledPackages(self) -> list[PackageInfo]:
        """Every installed package, in uid order (the order they were first installed)."""
        return sorted(self._packages.values(), key=lambda info: info.uid)

    def isPackageInstalled(self, packageName: str) -> bool:
        return packageName in self._packages

    # --- permissions

    def checkPermission(self, permission: str, uid: int) -> PermissionResult:
        """Whether ``uid`` holds ``permission``: ``PERMISSION_GRANTED`` or ``PERMISSION_DENIED``.

        Root and system hold everything; the shell holds ``SHELL_PERMISSIONS``; an app
        holds what its manifest requested; an unknown uid (or an uninstalled app) nothing.
        """
        _check_permission_name(permission)
        _check_uid(uid)
        if uid in (AID_ROOT, AID_SYSTEM):
            return PERMISSION_GRANTED
        if uid == AID_SHELL:
            return PERMISSION_GRANTED if permission in self._shell_permissions else PERMISSION_DENIED
        name = self._by_uid.get(uid)
        if name is not None and permission in self._packages[name].grantedPermissions:
            return PERMISSION_GRANTED
        return PERMISSION_DENIED

    def enforcePermission(self, permission: str, uid: int, message: str | None = None) -> None:
        """Raise ``SecurityException`` unless ``uid`` holds ``permission`` (``Context.enforcePermission``)."""
        if not self.checkPermission(permission, uid):
            who = self.getNameForUid(uid) or "unknown"
            prefix = f"{message}: " if message else ""
            raise SecurityException(f"{prefix}uid {uid} ({who}) does not hold {permission}")

    # --- dumpsys

    def dump(self) -> dict:
        """Plain data for ``dumpsys package``: the device, then every package by uid."""
        return {
            "sdk_int": self._sdk_int,
            "system_features": sorted(self._features),
            "shell_permissions": sorted(self._shell_permissions),
            "packages": [info.to_dict() for info in self.getInstalledPackages()],
            # Every uid ever given out, so a uid seen in an old log can still be named.
            "uids": [
                {"uid": uid, "packageName": name, "installed": name in self._packages}
                for name, uid in sorted(self._uid_of.items(), key=lambda item: item[1])
            ],
        }
