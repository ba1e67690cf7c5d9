"""What every ``dumpsys`` of system_server shares: the reply must fit a binder transaction.

Android's ``dumpsys`` writes into a pipe, so a service's dump has no size limit there;
here a dump is the reply of one binder call, and the binder refuses a transaction over
1 MiB (``TransactionTooLargeException``). So a dump that lists what apps can make many
of pages (``dumpsys npu --page N``) or summarises, and :func:`fit_reply` is the last
guard: a dump that would still be longer than ``DUMP_REPLY_LIMIT`` is cut there, with a
line that says so, rather than failing.
"""

from __future__ import annotations

from framework.binder import IllegalArgumentException

__all__ = ["DUMP_REPLY_LIMIT", "fit_reply", "page_arg"]

#: The most bytes a dump reply carries: half the binder's 1 MiB transaction limit (the
#: reply's encoding and whatever else the process has in flight share the rest).
DUMP_REPLY_LIMIT = 512 * 1024


def fit_reply(text: str, what: str) -> str:
    """``text``, or its first ``DUMP_REPLY_LIMIT`` bytes (whole lines) and a line saying how much was cut."""
    data = text.encode("utf-8")
    if len(data) <= DUMP_REPLY_LIMIT:
        return text
    note = f"... {what}: the dump was cut at {DUMP_REPLY_LIMIT} bytes of {len(data)} (binder's reply limit)\n"
    head = data[: DUMP_REPLY_LIMIT - len(note.encode())]
    head = head[: head.rfind(b"\n") + 1]
    return head.decode("utf-8", "ignore") + note


def page_arg(args: list[str], what: str) -> tuple[int, list[str]]:
    """``--page N`` (0 if absent) and the other arguments."""
    rest: list[str] = []
    page = 0
    it = iter(args)
    for arg in it:
        if arg == "--page" or arg.startswith("--page="):
            value = arg.partition("=")[2] if "=" in arg else next(it, "")
            if not (value.isascii() and value.isdigit()):
                raise IllegalArgumentException(f"{what}: --page takes a page number (0, 1, ...), not {value!r}")
            page = int(value)
        else:
            rest.append(arg)
    return page, rest
