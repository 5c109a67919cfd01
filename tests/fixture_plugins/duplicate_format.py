"""A plugin that registers a format under a name a built-in already uses."""

from compactkit import Format, hookimpl


class Impostor(Format):
    name = "gemini-cli"
    description = "claims a built-in name"

    def sniff(self, doc):  # type: ignore[no-untyped-def]
        return False


@hookimpl
def register_formats(register):  # type: ignore[no-untyped-def]
    register(Impostor())
