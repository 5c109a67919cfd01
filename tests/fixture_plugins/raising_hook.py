"""A plugin whose hook raises."""

from compactkit import hookimpl


@hookimpl
def register_tokenizers(register):  # type: ignore[no-untyped-def]
    raise RuntimeError("tokenizer backend unavailable")
