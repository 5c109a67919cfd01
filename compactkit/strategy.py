"""The strategy contract: `compact(ctx) -> ctx`, pure, with validated options."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from .context import AgentContext, SummaryBlock
from .errors import ConfigError, redact

if TYPE_CHECKING:
    from .tokens import TokenCounter


class StrategyOptions(BaseModel):
    """Base of every strategy's options: frozen, unknown keys rejected, every field described."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class SummaryCall:
    """The model call that wrote one summary in production, as a bill counts it (what the bench
    charges a compaction whose summary a model would write; see `Strategy.summary_call`)."""

    input_tokens: int
    """Tokens the summarizer was sent: what it summarized plus its instruction."""
    output_tokens: int
    """Tokens of the summary the model wrote (not what the strategy adds around it)."""
    shares_prefix: bool = False
    """The call sends the conversation as the model last saw it and then the instruction, so the
    part of its input equal to the previous model call's prompt is read from the provider's cache
    (Claude Code, Codex); False for a separate summarizer prompt, which shares nothing."""


EXTRACTIVE = "extractive"
"""The offline summarizer backend: its summaries cost no model call."""


Stage = Literal["trigger", "arrival"]
"""When a pipeline runs a strategy: at the trigger, on the whole history, or on arrival, on each
new message as it is appended (see `Strategy.stage`)."""

TRIGGER: Stage = "trigger"
ARRIVAL: Stage = "arrival"


class Strategy:
    """A compaction strategy. Subclasses set `name`, `description`, an `Options` model, and
    implement `compact`.

    `compact` must be pure: never mutate its input, give the same output for the same input and
    options, read and write nothing outside the value (an LLM call is the one declared exception).

    An arrival strategy (`stage = "arrival"`) has the same `compact(ctx) -> ctx`, called once per
    appended message with the context ending on that message: it may change only that last
    message (and add recovery entries for what it removed), and running it again on its own output
    changes nothing (`compactkit.validate.validate_arrival`).
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    Options: ClassVar[type[StrategyOptions]] = StrategyOptions
    stage: ClassVar[Stage] = TRIGGER
    """`"trigger"`: run on the whole history when a compaction is due. `"arrival"`: run on each
    new message as it is appended (the context ending on it), changing only that message."""
    budget_option: ClassVar[str | None] = None
    """Name of the option that `--budget` fills when the user did not set it."""
    trigger_option: ClassVar[str | None] = None
    """Name of the option that the runner's trigger (the bench's `--trigger`) fills when the spec
    did not set it and does not say `native=true`: a policy that decides itself when to compact
    (the `peer-*` strategies) then compacts at the same trigger as compactkit's pipelines."""
    keeps_pins: ClassVar[bool] = True
    """Whether the pipeline checks this strategy's output against the pins (`compactkit.pins`).
    Only compactkit's own reference policies of other tools (the `peer-*` strategies, measured in
    the bench as those tools ship them) say False, and only they are believed: for any other class
    the pins are checked whatever it says."""
    budget_required: ClassVar[bool] = False
    """True when the strategy changes nothing until its budget option is set: a pipeline run
    without one says so in the strategy's step note (`run` prints it) instead of staying silent."""

    summary_by_model: ClassVar[bool] = False
    """True when a model writes this strategy's summaries in production even where compactkit
    writes their text offline (the `peer-*` policies of agents that summarize with a model): the
    bench charges each one a summarizer call. Otherwise only a summary whose `SummaryBlock.backend`
    is a model backend (not `extractive`) is charged."""
    summary_instruction_tokens: ClassVar[int | None] = None
    """Tokens of the instruction a model is sent with what it summarizes (a peer's own prompt);
    None: the prompt of compactkit's summarizer backends (`compactkit.summarize.SYSTEM_PROMPT`)."""
    summary_shares_prefix: ClassVar[bool] = False
    """Whether the summarizer call sends the conversation itself, then the instruction (see
    `SummaryCall.shares_prefix`)."""

    def __init__(self, options: StrategyOptions | Mapping[str, Any] | None = None, **kwargs: Any):
        if isinstance(options, StrategyOptions):
            if kwargs:
                options = options.model_copy(update=kwargs)
            self.options = self.Options.model_validate(options.model_dump())
        else:
            self.options = make_options(self.Options, {**(options or {}), **kwargs}, self.name)

    def compact(self, ctx: AgentContext) -> AgentContext:
        raise NotImplementedError

    def __call__(self, ctx: AgentContext) -> AgentContext:
        return self.compact(ctx)

    def summary_call(
        self, block: SummaryBlock, before: AgentContext, after: AgentContext, counter: TokenCounter
    ) -> SummaryCall | None:
        """The model call that wrote `block`, a summary this strategy put in `after` when
        compacting `before`; None when no model call wrote it (the extractive backend).

        The default: a block written by a model backend (or any block, with `summary_by_model`)
        cost one call, whose input is what the summary replaced as the model was shown it (the
        whole of `before` with `summary_shares_prefix`) plus `summary_instruction_tokens`, and
        whose output is the block's text. Override it when the input or the summary's own text
        is narrower (a peer that reads only part of its window, or adds kept messages to it).

        Args:
            block: the new summary in `after`.
            before: the context the strategy was given.
            after: what it returned.
            counter: the token counter of the run.
        """
        if not self.summary_by_model and block.backend in ("", EXTRACTIVE):
            return None
        instruction = self.summary_instruction_tokens
        if instruction is None:
            from .prompts import SYSTEM_PROMPT

            instruction = counter.text(SYSTEM_PROMPT)
        output = counter.text(block.text)
        if self.summary_shares_prefix:
            read = counter.context(before)
        else:  # what went: the tokens that left, the summary's own message aside
            read = max(counter.context(before) - counter.context(after) + output, 0)
        return SummaryCall(read + instruction, output, self.summary_shares_prefix)

    @property
    def label(self) -> str:
        """`name` plus the options that differ from their defaults."""
        changed = self.options.model_dump(exclude_defaults=True)
        if not changed:
            return self.name
        return redact(f"{self.name}:" + ",".join(f"{k}={v}" for k, v in sorted(changed.items())))

    def __repr__(self) -> str:
        return f"<Strategy {self.label}>"


OptionsT = TypeVar("OptionsT", bound=StrategyOptions)


def make_options(model: type[OptionsT], values: Mapping[str, Any], strategy: str) -> OptionsT:
    try:
        return model.model_validate(dict(values))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'options'}: {err['msg']}"
            for err in exc.errors()
        )
        known = ", ".join(model.model_fields) or "none"
        raise ConfigError(
            f"bad options for strategy {strategy!r}: {problems} (options: {known})"
        ) from None


def strategy(
    name: str,
    *,
    options: type[StrategyOptions] = StrategyOptions,
    description: str | None = None,
    budget_option: str | None = None,
    trigger_option: str | None = None,
    stage: Stage = TRIGGER,
) -> Callable[[Callable[[AgentContext, Any], AgentContext]], type[Strategy]]:
    """Turn a plain function `fn(ctx, options) -> ctx` into a strategy class; `stage="arrival"`
    makes it an arrival strategy (`ctx` ends on the new message, the one it may change).

    >>> @strategy("drop-images")
    ... def drop_images(ctx, options):
    ...     return ctx
    """
    if stage not in (TRIGGER, ARRIVAL):
        raise ConfigError(f"strategy {name!r}: stage must be 'trigger' or 'arrival', not {stage!r}")

    def wrap(fn: Callable[[AgentContext, Any], AgentContext]) -> type[Strategy]:
        def compact(self: Strategy, ctx: AgentContext) -> AgentContext:
            return fn(ctx, self.options)

        cls = type(
            fn.__name__,
            (Strategy,),
            {
                "name": name,
                "description": description or (fn.__doc__ or "").strip().split("\n")[0],
                "Options": options,
                "budget_option": budget_option,
                "trigger_option": trigger_option,
                "stage": stage,
                "compact": compact,
                "__module__": fn.__module__,
                "__doc__": fn.__doc__,
            },
        )
        return cls

    return wrap
