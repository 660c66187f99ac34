"""One ``with`` protocol for everything that has a ``close()``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    from types import TracebackType

__all__ = ["ClosesOnExit"]


class ClosesOnExit:
    """Mixin: ``with obj:`` returns ``obj`` and calls ``obj.close()`` when the block ends.

    .. versionadded:: 0.1.0
    """

    __slots__ = ()

    def close(self) -> None:
        """Release what the object holds (provided by the class that mixes this in)."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
