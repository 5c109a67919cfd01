"""A working third-party tokenizer: one token per whitespace-separated word."""

from compactkit import hookimpl


class Words:
    name = "words"
    description = "one token per whitespace-separated word"

    def count(self, text):  # type: ignore[no-untyped-def]
        return len(text.split())

    def count_many(self, texts):  # type: ignore[no-untyped-def]
        return [self.count(t) for t in texts]


@hookimpl
def register_tokenizers(register):  # type: ignore[no-untyped-def]
    register(Words())
