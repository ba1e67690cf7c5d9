"""Interface classes made from AIDL definitions: ``IFoo.Stub``, ``IFoo.asInterface``.

``interface_class(registry.interface("android.hardware.npu.IScheduling"))`` gives
what the AIDL compiler would have generated::

    class MyScheduling(IScheduling.Stub):           # the service side
        async def setSchedulingConfigs(self, configs):
            ...

    hal = IScheduling.asInterface(binder)           # the caller side
    await hal.setSchedulingConfigs([...])

Handlers are ``async def`` methods named as in the .aidl, taking the arguments in
declaration order. A method with ``out``/``inout`` arguments returns
``(result, *outs)`` (``result`` is None for void); the proxy returns the same
shape, so local and remote calls look alike. A handler raises an exception of
``framework.binder`` (``IllegalArgumentException``, ``ServiceSpecificException``...)
to send that status; anything else is logged and becomes a failure status, and
the server goes on.

The per-method work is done once, here, when the class is made: the proxy's
methods close over their ``MethodDef`` and the stub's dispatch is a dict lookup
from code to an unbound function, so a call costs no reflection.
"""

from __future__ import annotations

from typing import Any

from ._runtime import Binder, BinderProxy, IBinder
from ._status import BadParcelableException, UnknownTransactionException, UnsupportedOperationException

__all__ = ["interface_class"]

# id(InterfaceDef) -> (InterfaceDef, class). A memo of a pure function (like the
# re module's cache), so that every caller gets the same class and isinstance works;
# it holds the definition, so an id is never reused while its entry lives.
_CLASSES: dict[int, tuple[Any, type]] = {}


def interface_class(interface: Any) -> type:
    """The interface class (with ``Stub``, ``Proxy``, ``asInterface``) for an ``InterfaceDef``."""
    hit = _CLASSES.get(id(interface))
    if hit is not None and hit[0] is interface:
        return hit[1]
    cls = _make_interface_class(interface)
    _CLASSES[id(interface)] = (interface, cls)
    return cls


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


def _make_proxy_method(method: Any):
    name = method.name

    # Arity and types are the codec's to check (encode_call takes either every
    # argument or only the in/inout ones), so a bad call fails before it is sent.
    async def call(self: InterfaceProxy, *args: Any) -> Any:
        return await self._remote._call(method, args)

    call.__name__ = call.__qualname__ = name
    sig = ", ".join(f"{a.direction} {a.type.name} {a.name}" for a in method.args)
    call.__doc__ = f"{'oneway ' if method.oneway else ''}{method.return_type.name} {name}({sig})"
    return call


def _make_interface_class(interface: Any) -> type:
    descriptor = interface.name
    short = descriptor.rsplit(".", 1)[-1]
    methods = tuple(interface.methods)
    by_code = {m.code: m for m in methods}
    if len(by_code) != len(methods):
        raise ValueError(f"{descriptor}: two methods share a transaction code")

    proxy_ns: dict[str, Any] = {"__slots__": (), "DESCRIPTOR": descriptor}
    for m in methods:
        proxy_ns[m.name] = _make_proxy_method(m)
    Proxy = type(f"{short}.Proxy", (InterfaceProxy,), proxy_ns)
    Proxy.__qualname__ = f"{short}.Proxy"

    class Stub(Binder):
        __doc__ = f"Subclass and implement the methods of {descriptor} as ``async def``."
        DESCRIPTOR = descriptor
        _interface = interface
        _table: dict[int, tuple[Any, Any, bool]] = {}

        def __init_subclass__(cls, **kwargs: Any) -> None:
            super().__init_subclass__(**kwargs)
            cls._table = {
                m.code: (m, getattr(cls, m.name, None), _has_outs(m)) for m in methods
            }

        def asBinder(self) -> Binder:  # noqa: N802
            return self

        async def onTransact(self, code: int, data: Any, ctx: Any) -> Any:  # noqa: N802
            entry = self._table.get(code)
            if entry is None:
                raise UnknownTransactionException(f"{descriptor} has no transaction code {code}")
            method, fn, has_outs = entry
            if fn is None:
                raise UnsupportedOperationException(f"{type(self).__name__} does not implement {method.name}")
            args = method.decode_call(data, ctx)
            result = await fn(self, *args)
            if method.oneway:
                return None
            if has_outs:
                if not isinstance(result, tuple) or len(result) != 1 + sum(
                    a.direction != "in" for a in method.args
                ):
                    raise TypeError(
                        f"{type(self).__name__}.{method.name} has out arguments: return (result, *outs)"
                    )
                return method.encode_reply(result[0], result[1:], ctx)
            return method.encode_reply(result, (), ctx)

    Stub.__qualname__ = Stub.__name__ = f"{short}.Stub"
    Stub._table = {m.code: (m, None, _has_outs(m)) for m in methods}

    def asInterface(binder: Any) -> Any:  # noqa: N802
        """The typed interface of ``binder``: itself if it is a local implementation,
        a proxy if it is remote, None for None."""
        if binder is None:
            return None
        if isinstance(binder, (Stub, Proxy)):
            return binder
        if isinstance(binder, InterfaceProxy):
            binder = binder._remote
        if isinstance(binder, BinderProxy):
            if binder._descriptor and binder._descriptor != descriptor:
                raise BadParcelableException(f"{binder!r} is not a {descriptor}")
            return Proxy(binder)
        if isinstance(binder, Binder):
            raise BadParcelableException(
                f"local {type(binder).__name__} ({binder.DESCRIPTOR or 'IBinder'}) is not a {descriptor}"
            )
        if isinstance(binder, IBinder):
            return Proxy(binder)  # pragma: no cover - no other IBinder kinds today
        raise TypeError(f"expected an IBinder, got {type(binder).__name__}")

    ns: dict[str, Any] = {
        "__doc__": f"The AIDL interface {descriptor}.",
        "DESCRIPTOR": descriptor,
        "Stub": Stub,
        "Proxy": Proxy,
        "asInterface": staticmethod(asInterface),
        "definition": interface,
    }
    for cname, value in dict(interface.constants).items():
        ns[cname] = value
    cls = type(short, (), ns)
    return cls
