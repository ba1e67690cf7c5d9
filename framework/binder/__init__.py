"""framework.binder: trio IPC with AIDL-defined interfaces and msgpack parcelables.

General layout (everything lives in private modules; this file only re-exports):

- ``_status``: Android's exception codes and status_t values, and the exceptions
  (``RemoteException`` and its builtin-flavoured subclasses) a caller sees.
- ``_wire``: the sans-IO protocol, as h11: length-prefixed frames (a call's two
  under fixed binary headers, the handshake's as msgpack arrays), the events, and
  the one table of connection state transitions. Bytes in, events out.
- ``_reader``: who reads a connection, sans-IO too: the reading role that callers
  (client) and serving tasks (server) take turns to hold, as a state machine with one
  transition table. Parties in, wake-ups out.
- ``_transport``: where the bytes travel. ``UnixNetwork`` (sockets 0600 in a 0700
  runtime directory, ``SO_PEERCRED``, ``SCM_RIGHTS``) and ``MemoryNetwork`` (a
  whole stack inside one trio run, for tests under the mock clock).
- ``_aidl``, ``aidlc``, ``aidl_support``: the AIDL compiler, which runs ahead of
  time as Android's ``aidl`` tool does: the front end (a lark grammar, resolution and
  every check), the back end (readable, typed Python modules: ``npuemu aidl``), and
  what the generated modules call. ``_parcel``: the library the generated codecs of
  parcelables and method calls call (checks, binders and descriptors through the
  parcel's context, the wire forms); ``_fd``: ``ParcelFileDescriptor`` and ``SharedMemory``.
  ``aidl/``: the binder's own AIDL (``android.os.IServiceManager``), compiled.
- ``_runtime``: the per-process runtime (``open_runtime``), ``Binder`` and
  ``BinderProxy``, death notices, calling identity. It is given, not imports, who
  vouches for a peer's uid (a resolver) and how a binder gets its typed face (an
  interface factory).
- ``_interface``: the bases of generated interfaces, stubs and proxies.
- ``_servicemanager``: the registry and pid -> uid records; ``servicemanager`` is
  its ``python -m`` entry point. ``_launch`` and ``_gate``: starting a child under
  a uid; ``_isolation``: its OS identity (uids, capabilities, non-dumpable) and the
  cgroup an app's processes die together in.
- ``_nursery``: ``open_service_nursery`` (a nursery whose body's exception leaves
  as itself, not in an ``ExceptionGroup``) and ``single_exception``.
- ``_open``: ``open_binder_runtime``, the runtime with the usual resolver (ask the
  servicemanager) and interface factory (``interface_class``) passed in.

The layering is one way: ``_wire`` knows only ``_status``; ``_reader`` knows
nothing; ``_transport`` knows ``_wire``; ``_runtime`` builds on the three; ``_interface`` and the servicemanager are
ordinary users of the runtime, and ``_open`` ties them together. Nothing here knows
anything about NPUs.
"""

from ._aidl import AidlError as AidlError
from .aidlc import AidlRegistry as AidlRegistry
from ._aidl import AidlSyntaxError as AidlSyntaxError
from ._fd import ParcelFileDescriptor as ParcelFileDescriptor
from ._fd import SharedMemory as SharedMemory
from ._interface import InterfaceProxy as InterfaceProxy
from ._interface import interface_class as interface_class
from ._isolation import CAP_KILL as CAP_KILL
from ._isolation import CAP_SETGID as CAP_SETGID
from ._isolation import CAP_SETUID as CAP_SETUID
from ._isolation import CGROUP_ENV as CGROUP_ENV
from ._isolation import SHARED_RUNTIME_DIR_MODE as SHARED_RUNTIME_DIR_MODE
from ._isolation import ISOLATION_ENV as ISOLATION_ENV
from ._isolation import ProcessCgroup as ProcessCgroup
from ._isolation import become_uid as become_uid
from ._isolation import has_os_uids as has_os_uids
from ._isolation import isolation as isolation
from ._isolation import kill_process_tree as kill_process_tree
from ._isolation import kill_processes_of_uid as kill_processes_of_uid
from ._isolation import make_non_dumpable as make_non_dumpable
from ._isolation import os_credentials as os_credentials
from ._isolation import pidfd_kill as pidfd_kill
from ._isolation import set_no_new_privs as set_no_new_privs
from ._launch import HeldProcess as HeldProcess
from ._launch import launch_process as launch_process
from ._launch import spawn_held as spawn_held
from ._nursery import open_service_nursery as open_service_nursery
from ._nursery import single_exception as single_exception
from ._runtime import RUNTIME_DIR_ENV as RUNTIME_DIR_ENV
from ._runtime import SERVICEMANAGER_ADDRESS as SERVICEMANAGER_ADDRESS
from ._runtime import SHELL_TOKEN_FILE as SHELL_TOKEN_FILE
from ._runtime import Binder as Binder
from ._runtime import BinderProxy as BinderProxy
from ._runtime import BinderRuntime as BinderRuntime
from ._runtime import DeathRecipient as DeathRecipient
from ._runtime import IBinder as IBinder
from ._open import open_binder_runtime as open_binder_runtime
from ._servicemanager import AID_ROOT as AID_ROOT
from ._servicemanager import AID_SHELL as AID_SHELL
from ._servicemanager import AID_SYSTEM as AID_SYSTEM
from ._servicemanager import FIRST_APPLICATION_UID as FIRST_APPLICATION_UID
from ._servicemanager import LAST_APPLICATION_UID as LAST_APPLICATION_UID
from ._servicemanager import defaultServiceManager as defaultServiceManager
from ._servicemanager import serve_servicemanager as serve_servicemanager
from ._status import DEAD_OBJECT as DEAD_OBJECT
from ._status import EX_BAD_PARCELABLE as EX_BAD_PARCELABLE
from ._status import EX_ILLEGAL_ARGUMENT as EX_ILLEGAL_ARGUMENT
from ._status import EX_ILLEGAL_STATE as EX_ILLEGAL_STATE
from ._status import EX_NETWORK_MAIN_THREAD as EX_NETWORK_MAIN_THREAD
from ._status import EX_NONE as EX_NONE
from ._status import EX_NULL_POINTER as EX_NULL_POINTER
from ._status import EX_PARCELABLE as EX_PARCELABLE
from ._status import EX_SECURITY as EX_SECURITY
from ._status import EX_SERVICE_SPECIFIC as EX_SERVICE_SPECIFIC
from ._status import EX_TRANSACTION_FAILED as EX_TRANSACTION_FAILED
from ._status import EX_UNSUPPORTED_OPERATION as EX_UNSUPPORTED_OPERATION
from ._status import FAILED_TRANSACTION as FAILED_TRANSACTION
from ._status import FIRST_CALL_TRANSACTION as FIRST_CALL_TRANSACTION
from ._status import INTERFACE_TRANSACTION as INTERFACE_TRANSACTION
from ._status import LAST_CALL_TRANSACTION as LAST_CALL_TRANSACTION
from ._status import MAX_TRANSACTION_SIZE as MAX_TRANSACTION_SIZE
from ._status import OK as OK
from ._status import PING_TRANSACTION as PING_TRANSACTION
from ._status import UNKNOWN_TRANSACTION as UNKNOWN_TRANSACTION
from ._status import BadParcelableException as BadParcelableException
from ._status import DeadObjectException as DeadObjectException
from ._status import IllegalArgumentException as IllegalArgumentException
from ._status import IllegalStateException as IllegalStateException
from ._status import NullPointerException as NullPointerException
from ._status import ProtocolError as ProtocolError
from ._status import RemoteException as RemoteException
from ._status import SecurityException as SecurityException
from ._status import ServiceSpecificException as ServiceSpecificException
from ._status import TransactionError as TransactionError
from ._status import TransactionFailedException as TransactionFailedException
from ._status import TransactionTooLargeException as TransactionTooLargeException
from ._status import UnknownTransactionException as UnknownTransactionException
from ._status import UnsupportedOperationException as UnsupportedOperationException
from ._transport import MemoryNetwork as MemoryNetwork
from ._transport import UnixNetwork as UnixNetwork
