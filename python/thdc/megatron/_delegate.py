"""Members one object gives of another: GraphStep those of its first slot,
StepSlot those of its top rung."""
from __future__ import annotations


class Delegated:
    """A member of the class that an instance takes from the object in its
    attribute `via`: declared in the class body, so that readers, help() and
    tools find it on the class, with the delegated member's documentation.

    `bind(instance)`, when the instance is made, stores the member in the
    instance's own dict. This descriptor defines no __set__, so the stored
    member shadows it: `step.run` is then a plain attribute read, with no
    call through the descriptor on the launch path. __get__ answers only
    before bind (or after a del)."""

    def __init__(self, via: str, member=None, doc: str = ""):
        self.via = via
        self.__doc__ = doc or getattr(member, "__doc__", None)
        # inspect.signature and inspect.unwrap follow __wrapped__ to the
        # function at the end of the chain (GraphStep.run: SlotRung.run).
        if member is not None:
            self.__wrapped__ = getattr(member, "__wrapped__", member)

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        return getattr(getattr(instance, self.via), self.name)

    def __call__(self, instance, *args, **kwargs):
        """`GraphStep.run(step, ...)`, as a method of the class is called."""
        return getattr(instance, self.name)(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<member {self.name!r} of .{self.via}>"

    @staticmethod
    def bind(instance) -> None:
        """Stores every Delegated member of the instance's class in the
        instance's dict (after its `via` attributes are set)."""
        for klass in reversed(type(instance).__mro__):
            for name, member in vars(klass).items():
                if isinstance(member, Delegated):
                    instance.__dict__[name] = getattr(getattr(instance, member.via), name)
