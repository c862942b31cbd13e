"""Members one object gives of another: GraphStep those of its first slot,
StepSlot those of its top rung."""
from __future__ import annotations

from typing import Any, Callable, Concatenate, Generic, Optional, ParamSpec, TypeVar, overload

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


class Delegated(Generic[P, R]):
    """A member of the class that an instance takes from the object in its
    attribute `via`: declared in the class body, so that readers, help() and
    tools find it on the class, with the delegated member's documentation.

    `bind(instance)`, when the instance is made, stores the member in the
    instance's own dict. This descriptor defines no __set__, so the stored
    member shadows it: `step.run` is then a plain attribute read, with no
    call through the descriptor on the launch path. __get__ answers only
    before bind (or after a del)."""

    @overload
    def __init__(self, via: str, member: "Callable[Concatenate[Any, P], R]",
                 doc: str = "") -> None: ...

    @overload
    def __init__(self, via: str, member: "Delegated[P, R]", doc: str = "") -> None: ...

    @overload
    def __init__(self, via: str, member: None = None, doc: str = "") -> None: ...

    def __init__(self, via: str, member: Any = None, doc: str = "") -> None:
        # Typed for checkers: a method's member gives the bound method's
        # parameters (P) and result (R), through another Delegated too.
        self.via = via
        self.__doc__ = doc or getattr(member, "__doc__", None)
        # inspect.signature and inspect.unwrap follow __wrapped__ to the
        # function at the end of the chain (GraphStep.run: SlotRung.run).
        if member is not None:
            self.__wrapped__ = getattr(member, "__wrapped__", member)

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: Optional[type] = None) -> "Delegated[P, R]": ...

    @overload
    def __get__(self, instance: object, owner: Optional[type] = None) -> "Callable[P, R]": ...

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        if instance is None:
            return self
        return getattr(getattr(instance, self.via), self.name)

    def __call__(self, instance: Any, *args: P.args, **kwargs: P.kwargs) -> R:
        """`GraphStep.run(step, ...)`, as a method of the class is called."""
        return getattr(instance, self.name)(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<member {self.name!r} of .{self.via}>"

    @staticmethod
    def bind(instance: object) -> None:
        """Stores every Delegated member of the instance's class in the
        instance's dict (after its `via` attributes are set)."""
        for klass in reversed(type(instance).__mro__):
            for name, member in vars(klass).items():
                if isinstance(member, Delegated):
                    instance.__dict__[name] = getattr(getattr(instance, member.via), name)


class DelegatedValue(Delegated[..., Any], Generic[T]):
    """A Delegated attribute (a tensor, a dict) rather than a method: typed
    by its value, `DelegatedValue[torch.Tensor]("_top", doc=...)`, or by the
    DelegatedValue it takes, `DelegatedValue("_first", StepSlot.status)`."""

    @overload
    def __init__(self, via: str, member: "DelegatedValue[T]", doc: str = "") -> None: ...

    @overload
    def __init__(self, via: str, member: None = None, doc: str = "") -> None: ...

    def __init__(self, via: str, member: Any = None, doc: str = "") -> None:
        super().__init__(via, member, doc)

    @overload  # type: ignore[override]
    def __get__(self, instance: None, owner: Optional[type] = None) -> "DelegatedValue[T]": ...

    @overload
    def __get__(self, instance: object, owner: Optional[type] = None) -> T: ...

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        if instance is None:
            return self
        return getattr(getattr(instance, self.via), self.name)
