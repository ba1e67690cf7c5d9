"""The bases of the interface classes the AIDL compiler generates: ``IFoo.Stub``, ``IFoo.Proxy``.

A generated module (see ``aidlc``) declares, for ``interface IScheduling``::

    class IScheduling(Interface):
        class Stub(InterfaceStub):      # the service side: override the async methods
            async def setSchedulingConfigs(self, configs: list[SchedulingConfig]) -> None: ...
        class Proxy(InterfaceProxy):    # the caller side: each method sends a transaction
            async def setSchedulingConfigs(self, configs: list[SchedulingConfig]) -> None: ...

    hal = IScheduling.asInterface(binder)
    await hal.setSchedulingConfigs([...])

Handlers are ``async def`` methods named as in the .aidl, taking the arguments in
declaration order. A method with ``out``/``inout`` arguments takes its ``in`` and
``inout`` ones and returns ``(result, *outs)``, the out and inout values in
declaration order (``result`` is None for void); the proxy has the same signature
and returns the same shape, so local and remote calls look alike. A handler raises an exception of
``framework.binder`` (``IllegalArgumentException``, ``ServiceSpecificException``...)
to send that status; anything else is logged and becomes a failure status, and
the server goes on. A method the service does not override answers
``UnsupportedOperationException``.

The per-method work is done once, when a Stub class is made: its dispatch is a dict
lookup from transaction code to an unbound function, so a call costs no reflection.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ._runtime import Binder, BinderProxy, IBinder
from ._status import BadParcelableException, UnknownTransactionException, UnsupportedOperationException

__all__ = ["Interface", "InterfaceProxy", "InterfaceStub", "interface_class", "unimplemented"]


def interface_class(interface: Any) -> type:
    """The generated interface class (``Stub``, ``Proxy``, ``asInterface``) of an ``InterfaceDef``."""
    cls = getattr(interface, "cls", None)
    if cls is None:
        raise TypeError(f"{interface!r} is not an interface compiled by the AIDL compiler")
    return cls


def unimplemented(fn: Any) -> Any:
    """Marks a generated Stub method: a service that does not override it does not implement it."""
    fn._aidl_unimplemented = True
    return fn


class InterfaceProxy:
    """Base of generated proxies: the typed face of a :class:`BinderProxy`."""

    __slots__ = ("_remote",)
    DESCRIPTOR = ""

    def __init__(self, remote: BinderProxy) -> None:
        self._remote = remote

    def asBinder(self) -> BinderProxy:  # noqa: N802
        return self._remote

    def __eq__(self, other: object) -> bool:
        return isinstance(other, InterfaceProxy) and other._remote is self._remote

    def __hash__(self) -> int:
        return hash(self._remote)

    def __repr__(self) -> str:
        return f"<{type(self).__qualname__} of {self._remote!r}>"


def _has_outs(method: Any) -> bool:
    return any(arg.direction != "in" for arg in method.args)


def _dispatch_table(cls: type) -> dict[int, tuple[Any, Any, bool]]:
    table = {}
    for m in cls._interface.methods:
        fn = getattr(cls, m.name, None)
        if fn is not None and getattr(fn, "_aidl_unimplemented", False):
            fn = None
        table[m.code] = (m, fn, _has_outs(m))
    return table


class InterfaceStub(Binder):
    """Base of generated stubs: decodes a transaction, calls the method, encodes the reply."""

    DESCRIPTOR = ""
    _interface: ClassVar[Any] = None
    _table: ClassVar[dict[int, tuple[Any, Any, bool]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls._interface is not None:  # a service's subclass; the generated Stub is bound later
            cls._table = _dispatch_table(cls)

    def asBinder(self) -> Binder:  # noqa: N802
        return self

    async def onTransact(self, code: int, data: Any, ctx: Any) -> Any:  # noqa: N802
        entry = self._table.get(code)
        if entry is None:
            raise UnknownTransactionException(f"{self.DESCRIPTOR} has no transaction code {code}")
        method, fn, has_outs = entry
        if fn is None:
            raise UnsupportedOperationException(f"{type(self).__name__} does not implement {method.name}")
        args = method.decode_call(data, ctx)
        result = await fn(self, *args)
        if method.oneway:
            return None
        if has_outs:
            if not isinstance(result, tuple) or len(result) != 1 + sum(a.direction != "in" for a in method.args):
                raise TypeError(f"{type(self).__name__}.{method.name} has out arguments: return (result, *outs)")
            return method.encode_reply(result[0], result[1:], ctx)
        return method.encode_reply(result, (), ctx)


class Interface:
    """Base of generated interface classes; ``definition`` is the ``InterfaceDef``."""

    DESCRIPTOR: ClassVar[str] = ""
    definition: ClassVar[Any] = None
    Stub: ClassVar[type[InterfaceStub]]
    Proxy: ClassVar[type[InterfaceProxy]]

    @classmethod
    def asInterface(cls, binder: Any) -> Any:  # noqa: N802
        """The typed interface of ``binder``: itself if it is a local implementation,
        a proxy if it is remote, None for None."""
        if binder is None:
            return None
        if isinstance(binder, (cls.Stub, cls.Proxy)):
            return binder
        if isinstance(binder, InterfaceProxy):
            binder = binder._remote
        if isinstance(binder, BinderProxy):
            if binder._descriptor and binder._descriptor != cls.DESCRIPTOR:
                raise BadParcelableException(f"{binder!r} is not a {cls.DESCRIPTOR}")
            return cls.Proxy(binder)
        if isinstance(binder, Binder):
            raise BadParcelableException(
                f"local {type(binder).__name__} ({binder.DESCRIPTOR or 'IBinder'}) is not a {cls.DESCRIPTOR}"
            )
        if isinstance(binder, IBinder):
            return cls.Proxy(binder)  # pragma: no cover - no other IBinder kinds today
        raise TypeError(f"expected an IBinder, got {type(binder).__name__}")


def bind_interface(cls: type[Interface], interface: Any) -> None:
    """Ties a generated interface class to its definition (called by ``aidl_support.bind``)."""
    if len({m.code for m in interface.methods}) != len(interface.methods):
        raise ValueError(f"{interface.name}: two methods share a transaction code")
    cls.definition = interface
    cls.Stub._interface = interface
    cls.Stub._table = _dispatch_table(cls.Stub)
    cls.__doc__ = interface.doc or f"The AIDL interface {interface.name}."
