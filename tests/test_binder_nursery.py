"""open_service_nursery and single_exception: the one helper every layer's context
managers use so that a caller catches its own exception, not an ExceptionGroup."""

from __future__ import annotations

import pytest
import trio

from framework.binder import open_service_nursery, single_exception


async def test_the_bodys_exception_leaves_as_itself_and_the_background_is_cancelled():
    cancelled = trio.Event()

    async def background() -> None:
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()

    with pytest.raises(KeyError) as info:
        async with open_service_nursery() as nursery:
            nursery.start_soon(background)
            await trio.sleep(0)
            raise KeyError("mine")
    assert not isinstance(info.value, BaseExceptionGroup)
    assert cancelled.is_set()


async def test_a_clean_body_ends_the_background_tasks(autojump_clock):
    async with open_service_nursery() as nursery:
        nursery.start_soon(trio.sleep_forever)
    # Reaching here at all: the nursery did not wait for its sleeping task.
    assert trio.current_time() == 0


async def test_a_background_failure_is_not_the_bodys_and_stays_grouped():
    async def fails() -> None:
        raise ValueError("background")

    with pytest.raises(BaseExceptionGroup) as info:
        async with open_service_nursery() as nursery:
            nursery.start_soon(fails)
            await trio.sleep_forever()
    assert isinstance(single_exception(info.value), ValueError)


async def test_an_outer_cancel_still_cancels_the_body(autojump_clock):
    with trio.move_on_after(1) as scope:
        async with open_service_nursery():
            await trio.sleep_forever()
    assert scope.cancelled_caught


def test_single_exception_unwraps_nested_single_groups_only():
    leaf = KeyError("x")
    assert single_exception(BaseExceptionGroup("a", [ExceptionGroup("b", [leaf])])) is leaf
    two = ExceptionGroup("two", [KeyError("x"), ValueError("y")])
    assert single_exception(two) is two
    assert single_exception(leaf) is leaf
