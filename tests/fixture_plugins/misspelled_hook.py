"""A plugin with a typo in its hook name."""

from compactkit import hookimpl


@hookimpl
def register_formatz(register):  # type: ignore[no-untyped-def]
    pass
