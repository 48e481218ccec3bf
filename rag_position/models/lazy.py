"""A model given now, or loaded on first use (:class:`LazyModel`): how a framework
component holds the model it was given as a spec string until it first needs it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")

__all__ = ["LazyModel"]


class LazyModel(Generic[T]):
    """A model given now, or loaded on first use by ``loader`` (once, thread-safe).

    ``check`` (optional) sees the loaded model and returns it (or raises).

    Example:
        >>> lazy = LazyModel(loader=lambda: load_model("embedded"), label="'embedded'")
        >>> lazy.loaded
        False
        >>> lazy.get() is lazy.get()       # loaded once, on the first call
        True
    """

    def __init__(
        self,
        value: T | None = None,
        *,
        loader: Callable[[], T] | None = None,
        label: str = "",
        check: Callable[[Any], T] | None = None,
    ) -> None:
        if value is not None and loader is not None:
            raise ValueError("give a LazyModel a value or a loader, not both")
        self._value = value
        self._loader = loader
        self._check = check
        self._lock = threading.Lock()
        self.label = label

    def __deepcopy__(self, memo: dict[int, Any]) -> LazyModel[T]:
        """Itself: a deep copy of a component shares its model, loaded or not (a model is
        read, never changed, and may hold what cannot be copied: a lock, a connection)."""
        return self

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory (a given object always is)."""
        return self._loader is None

    def add_check(self, check: Callable[[Any], Any]) -> None:
        """Run ``check(model)`` once the model is in memory: now for a given or loaded model,
        else right after loading (after any ``check`` given at construction). What ``check``
        returns is ignored; it may warn or raise."""
        with self._lock:
            if self._loader is not None:
                first = self._check

                def both(value: Any) -> T:
                    found: T = first(value) if first is not None else value
                    check(found)
                    return found

                self._check = both
                return
        check(self._value)

    def get(self) -> T:
        """The model, loading it first if needed."""
        if self._loader is not None:
            with self._lock:
                if self._loader is not None:
                    value = self._loader()
                    if self._check is not None:
                        value = self._check(value)
                    self._value, self._loader = value, None
        return self._value  # type: ignore[return-value]
