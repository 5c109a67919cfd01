"""The plugin registry: the one place that builds the plugin manager and calls its hooks.

Built-ins are ordinary plugins (listed in `DEFAULT_PLUGINS`) registered exactly as a third party's
would be. Each plugin loads, and each of its hooks runs, inside its own error handling: a broken
plugin is listed with its error and never stops the others. A name registered twice is an error that
names both plugins; using that name fails, every other name keeps working.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Generic, TypeVar

import pluggy

from . import hookspecs
from ._exitguard import load_timeout, no_process_exit, stdout_to_stderr, time_limit
from .context import AgentContext, Message
from .errors import ConfigError, PluginError
from .strategy import Strategy
from .tokens import DEFAULT_TOKENIZER, TokenCounter, Tokenizer

ENTRY_POINT_GROUP = "compactkit"
LOAD_PLUGINS_ENV = "COMPACTKIT_LOAD_PLUGINS"
PLUGINS_DIR_ENV = "COMPACTKIT_PLUGINS_DIR"
TRACE_ENV = "COMPACTKIT_TRACE_HOOKS"

DEFAULT_PLUGINS: tuple[str, ...] = (
    "compactkit.builtins.formats",
    "compactkit.builtins.tokenizers",
    "compactkit.builtins.strategies",
    "compactkit.builtins.peers",
    "compactkit.builtins.summarizers",
    "compactkit.builtins.scorers",
)

T = TypeVar("T")

# hook name -> (kind shown to users, what the name is read from)
KINDS: dict[str, str] = {
    "register_formats": "format",
    "register_tokenizers": "tokenizer",
    "register_strategies": "strategy",
    "register_summarizers": "summarizer",
    "register_scorers": "scorer",
}


@dataclass
class PluginInfo:
    """What `compactkit plugins` shows about one plugin."""

    name: str
    source: str  # "builtin", "entry-point", "plugins-dir" or "object"
    version: str | None = None
    hooks: list[str] = field(default_factory=list)
    provides: dict[str, list[str]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "version": self.version,
            "hooks": sorted(self.hooks),
            "provides": {k: sorted(v) for k, v in sorted(self.provides.items())},
            "errors": list(self.errors),
            "ok": self.ok,
        }


class Table(Generic[T]):
    """Registered things of one kind, by name, remembering which plugin gave each."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._owner: dict[str, str] = {}
        self._conflicts: dict[str, tuple[str, str]] = {}

    def add(self, name: str, item: T, plugin: str) -> str | None:
        """Add `item`; return an error message when the name is already taken."""
        if name in self._conflicts:
            first, _ = self._conflicts[name]
            return f"{self.kind} {name!r} is registered by both {first!r} and {plugin!r}"
        if name in self._items:
            first = self._owner[name]
            self._conflicts[name] = (first, plugin)
            del self._items[name]
            return f"{self.kind} {name!r} is registered by both {first!r} and {plugin!r}"
        self._items[name] = item
        self._owner[name] = plugin
        return None

    def get(self, name: str) -> T:
        if name in self._conflicts:
            a, b = self._conflicts[name]
            raise PluginError(
                f"{self.kind} {name!r} is registered by both {a!r} and {b!r}; "
                f"uninstall one or leave one out of {LOAD_PLUGINS_ENV}"
            )
        try:
            return self._items[name]
        except KeyError:
            known = ", ".join(sorted(self._items)) or "none"
            raise ConfigError(f"unknown {self.kind} {name!r} (known: {known})") from None

    def owner(self, name: str) -> str:
        return self._owner[name]

    def names(self) -> list[str]:
        return sorted(self._items)

    def items(self) -> list[tuple[str, T]]:
        return sorted(self._items.items())

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __len__(self) -> int:
        return len(self._items)


def _name_of(obj: Any) -> str:
    name = getattr(obj, "name", None)
    if not isinstance(name, str) or not name:
        raise PluginError(f"{type(obj).__name__} has no 'name' string attribute")
    return name


_BASES: dict[str, type] = {"strategy": Strategy}
"""The class whose subclasses a `register_*` hook of a kind takes. A kind defined above the
registry adds its own base when its module is imported (`compactkit.summarize.base` adds
`Summarizer`): a plugin's class can subclass a base only once its module is loaded."""


def require_subclass(kind: str, base: type) -> None:
    """Make the `register_*` hook of `kind` take subclasses of `base` (`check_registered`).

    Args:
        kind: the kind shown to users (`"summarizer"`).
        base: the class registered classes of that kind must subclass."""
    _BASES[kind] = base


def _subclass(kind: str, obj: Any) -> bool:
    base = _BASES.get(kind)
    return base is not None and isinstance(obj, type) and issubclass(obj, base)


def check_registered(kind: str, obj: Any, name: str) -> None:
    """Raise a `PluginError` saying what to register instead when `obj` is not what a
    `register_*` hook of `kind` takes (a class where an instance belongs, or the reverse)."""
    if kind == "strategy":
        if _subclass(kind, obj):
            return
        if isinstance(obj, type) or not callable(getattr(obj, "compact", None)):
            problem = "is not a Strategy subclass"
        else:
            problem = "is an instance"
        raise PluginError(
            f"strategy {name!r} {problem}: register the class (register(MyStrategy)) or a function "
            "decorated with @compactkit.strategy"
        )
    if kind == "summarizer":
        if _subclass(kind, obj):
            return
        if not isinstance(obj, type) and callable(getattr(obj, "summarize", None)):
            return  # a ready-made backend instance works too
        raise PluginError(
            f"summarizer {name!r} is not a Summarizer subclass: register the class "
            "(register(MyBackend)), whose summarize(request) returns the summary text"
        )
    needs = {"format": ("sniff", "load"), "tokenizer": ("count",), "scorer": ("score",)}[kind]
    example = {"format": "MyFormat()", "tokenizer": "MyTokenizer()", "scorer": "MyScorer()"}[kind]
    if isinstance(obj, type):
        raise PluginError(f"{kind} {name!r} is a class: register an instance, register({example})")
    missing = [m for m in needs if not callable(getattr(obj, m, None))]
    if missing:
        raise PluginError(f"{kind} {name!r} has no {', '.join(missing)} method(s)")


class Registry:
    """Formats, tokenizers, strategies, summarizers and scorers from every loaded plugin."""

    def __init__(self, pm: pluggy.PluginManager, plugins: list[PluginInfo]) -> None:
        self.pm = pm
        self.plugins = plugins
        self.tables: dict[str, Table[Any]] = {kind: Table(kind) for kind in KINDS.values()}
        self._counters: dict[str, TokenCounter] = {}
        self._observers: list[tuple[str, Any]] | None = None
        self.recipe: dict[str, Any] = {}
        """`make_registry` arguments that rebuild this registry in another process."""
        self._counters_lock = threading.Lock()
        for info in plugins:
            if info.ok or info.hooks:
                self._collect(info)

    # ----------------------------------------------------------------- collection

    def _caller(self, hook_name: str, plugin: object) -> Any:
        """A caller of `hook_name` that runs only `plugin`'s implementation, through pluggy (so
        `COMPACTKIT_TRACE_HOOKS` traces it) and one plugin at a time (so one failure is contained)."""
        others = [p for p in self.pm.get_plugins() if p is not plugin]
        return self.pm.subset_hook_caller(hook_name, remove_plugins=others)

    def _collect(self, info: PluginInfo) -> None:
        plugin = self.pm.get_plugin(info.name)
        if plugin is None:
            return
        for hook_name, kind in KINDS.items():
            hook = getattr(self.pm.hook, hook_name)
            if not any(impl.plugin is plugin for impl in hook.get_hookimpls()):
                continue
            collected: list[Any] = []
            try:
                self._caller(hook_name, plugin)(register=collected.append)
            except Exception as exc:  # a broken hook must not break the others
                info.errors.append(f"{hook_name} raised {type(exc).__name__}: {exc}")
                continue
            for obj in collected:
                try:
                    name = _name_of(obj)
                    check_registered(kind, obj, name)
                except PluginError as exc:
                    info.errors.append(f"{hook_name}: {exc}")
                    continue
                problem = self.tables[kind].add(name, obj, info.name)
                if problem:
                    info.errors.append(problem)
                    self._mark_conflict(name, kind)
                else:
                    info.provides.setdefault(kind, []).append(name)

    def _mark_conflict(self, name: str, kind: str) -> None:
        for other in self.plugins:
            names = other.provides.get(kind, [])
            if name in names:
                names.remove(name)
                message = self.tables[kind]._conflicts[name]
                line = f"{kind} {name!r} is registered by both {message[0]!r} and {message[1]!r}"
                if line not in other.errors:
                    other.errors.append(line)

    # ----------------------------------------------------------------- lookups

    @property
    def formats(self) -> Table[Any]:
        return self.tables["format"]

    @property
    def tokenizers(self) -> Table[Any]:
        return self.tables["tokenizer"]

    @property
    def strategies(self) -> Table[Any]:
        return self.tables["strategy"]

    @property
    def summarizers(self) -> Table[Any]:
        return self.tables["summarizer"]

    @property
    def scorers(self) -> Table[Any]:
        return self.tables["scorer"]

    @property
    def errors(self) -> list[tuple[str, str]]:
        return [(p.name, e) for p in self.plugins for e in p.errors]

    # ----------------------------------------------------------------- hook calls

    def emit(self, event: Any) -> list[str]:
        """Call `compaction_event` on every plugin, one at a time; return the errors raised
        (never raise)."""
        if self._observers is None:
            self._observers = [
                (impl.plugin_name, self._caller("compaction_event", impl.plugin))
                for impl in self.pm.hook.compaction_event.get_hookimpls()
            ]
        problems: list[str] = []
        for plugin_name, caller in self._observers:
            try:
                caller(event=event)
            except Exception as exc:
                problems.append(f"{plugin_name}: compaction_event raised {exc!r}")
        return problems

    @property
    def has_event_hooks(self) -> bool:
        return bool(self.pm.hook.compaction_event.get_hookimpls())

    # ----------------------------------------------------------------- shared per registry

    def counter(self, tokenizer: str) -> TokenCounter:
        """The caching `TokenCounter` for a tokenizer registered here (one per name)."""
        with self._counters_lock:
            counter = self._counters.get(tokenizer)
            if counter is None:
                counter = TokenCounter(self.tokenizers.get(tokenizer))
                self._counters[tokenizer] = counter
            return counter


def _allowed(env: Mapping[str, str]) -> set[str] | None:
    raw = env.get(LOAD_PLUGINS_ENV)
    if raw is None:
        return None
    return {part.strip() for part in raw.split(",") if part.strip()}


def _register(pm: pluggy.PluginManager, obj: Any, name: str, info: PluginInfo) -> None:
    try:
        pm.register(obj, name=name)
    except Exception as exc:
        info.errors.append(f"failed to register: {exc}")
        return
    unknown = [
        impl.function.__name__
        for hook in pm.hook.__dict__.values()
        if isinstance(hook, pluggy.HookCaller) and not hook.has_spec()
        for impl in hook.get_hookimpls()
        if impl.plugin is obj
    ]
    if unknown:
        info.errors.append(
            f"implements unknown hook(s) {', '.join(sorted(unknown))}; "
            "check the spelling against compactkit.hookspecs"
        )
    info.hooks = sorted(
        hook_name
        for hook_name, hook in pm.hook.__dict__.items()
        if isinstance(hook, pluggy.HookCaller)
        and any(impl.plugin is obj for impl in hook.get_hookimpls())
    )


def _load_plugins_dir(pm: pluggy.PluginManager, folder: str) -> list[PluginInfo]:
    """Each `*.py` file of `folder` (not starting with `_` or `.`) as one plugin module, imported
    and registered inside its own error handling, like an entry-point plugin."""
    path = Path(folder)
    if not path.is_dir():
        info = PluginInfo(name=folder, source="plugins-dir")
        info.errors.append(f"plugins folder {folder!r} does not exist")
        return [info]
    infos: list[PluginInfo] = []
    for file in sorted(path.glob("*.py")):
        if file.name.startswith(("_", ".")):
            continue
        info = PluginInfo(name=file.stem, source="plugins-dir")
        infos.append(info)
        # a prefixed module name, so a plugin file called json.py shadows nothing
        module_name = f"compactkit_plugins_dir_{file.stem}"
        try:
            spec = importlib.util.spec_from_file_location(module_name, file)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot import {file}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module  # pydantic resolves annotations through it
            # nor can it end the process with os._exit, print into results, or hang
            with no_process_exit(), stdout_to_stderr(), time_limit(load_timeout()):
                spec.loader.exec_module(module)
        except BaseException as exc:  # even SystemExit from a hostile import is contained
            sys.modules.pop(module_name, None)
            if isinstance(exc, KeyboardInterrupt):
                raise
            info.errors.append(f"failed to load {file}: {type(exc).__name__}: {exc}")
            continue
        _register(pm, module, file.stem, info)
    return infos


def make_registry(
    *,
    entry_points: bool = True,
    plugins: Iterable[Any] = (),
    env: Mapping[str, str] | None = None,
    defaults: Iterable[str] = DEFAULT_PLUGINS,
    plugins_dir: str | Path | None = None,
) -> Registry:
    """Build a plugin manager and registry.

    :param entry_points: load plugins installed under the `compactkit` entry-point group.
    :param plugins: extra plugin objects or modules (tests, embedding applications).
    :param env: environment to read `COMPACTKIT_LOAD_PLUGINS` and `COMPACTKIT_PLUGINS_DIR`
        from (default `os.environ`).
    :param defaults: module names of the built-in plugins.
    :param plugins_dir: a folder of unpackaged plugin modules (`*.py`, one plugin each);
        default `COMPACTKIT_PLUGINS_DIR`, if set.
    """
    env = os.environ if env is None else env
    pm = pluggy.PluginManager("compactkit")
    pm.add_hookspecs(hookspecs)
    if env.get(TRACE_ENV):
        pm.trace.root.setwriter(sys.stderr.write)
        pm.enable_tracing()
    infos: list[PluginInfo] = []
    allowed = _allowed(env)

    for module_name in defaults:
        info = PluginInfo(name=module_name, source="builtin")
        infos.append(info)
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            info.errors.append(f"failed to import: {type(exc).__name__}: {exc}")
            continue
        _register(pm, module, module_name, info)

    if entry_points:
        for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
            if allowed is not None and ep.name not in allowed:
                continue
            dist = getattr(ep, "dist", None)
            info = PluginInfo(
                name=ep.name,
                source="entry-point",
                version=getattr(dist, "version", None),
            )
            infos.append(info)
            try:
                with no_process_exit(), stdout_to_stderr(), time_limit(load_timeout()):
                    obj = ep.load()
            except BaseException as exc:  # even SystemExit from a hostile import is contained
                if isinstance(exc, KeyboardInterrupt):
                    raise
                info.errors.append(f"failed to load {ep.value}: {type(exc).__name__}: {exc}")
                continue
            _register(pm, obj, ep.name, info)

    folder = str(plugins_dir) if plugins_dir is not None else env.get(PLUGINS_DIR_ENV)
    if folder:
        infos.extend(_load_plugins_dir(pm, folder))

    for obj in plugins:
        name = getattr(obj, "__name__", None) or type(obj).__name__
        info = PluginInfo(name=str(name), source="object")
        infos.append(info)
        _register(pm, obj, str(name), info)

    registry = Registry(pm, infos)
    # how to build the same registry in a worker process or on another machine (plugin objects
    # cannot travel there; the variables that choose plugins go along)
    registry.recipe = {
        "entry_points": entry_points,
        "plugins_dir": folder or None,
        "env": {k: env[k] for k in (LOAD_PLUGINS_ENV, TRACE_ENV) if k in env},
    }
    return registry


_default: Registry | None = None
_lock = threading.Lock()


def get_registry() -> Registry:
    """The process-wide registry used by the top-level Python API (built on first use)."""
    global _default
    with _lock:
        if _default is None:
            _default = make_registry()
        return _default


def set_registry(registry: Registry | None) -> None:
    """Replace the process-wide registry (None: rebuild on next use)."""
    global _default
    with _lock:
        _default = registry


def init_worker(recipe: dict[str, Any]) -> None:
    """Process-pool initializer: make the worker's registry the way the parent's was made."""
    set_registry(make_registry(**recipe))


_active: ContextVar[Registry | None] = ContextVar("compactkit_active_registry", default=None)


def current_registry() -> Registry:
    """The registry of the pipeline running in this context (see `use_registry`), else the
    process-wide one. Strategies, counters and summarizer lookups go through this, so a pipeline
    built with `registry=` never reaches another registry."""
    return _active.get() or get_registry()


@contextmanager
def use_registry(registry: Registry | None) -> Iterator[None]:
    """Make `registry` the current one for the code run inside (a no-op for None)."""
    if registry is None:
        yield
        return
    token = _active.set(registry)
    try:
        yield
    finally:
        _active.reset(token)


def get_counter(tokenizer: str | Tokenizer = DEFAULT_TOKENIZER) -> TokenCounter:
    """The shared, caching counter for a tokenizer name, looked up in the current registry (the
    running pipeline's, else the process-wide one)."""
    if not isinstance(tokenizer, str):
        return TokenCounter(tokenizer)
    counter: TokenCounter = current_registry().counter(tokenizer)
    return counter


def count_tokens(
    value: AgentContext | Message | str, tokenizer: str | Tokenizer = DEFAULT_TOKENIZER
) -> int:
    """Tokens in a context, a message or a string (see the module docs for the rendering)."""
    counter = get_counter(tokenizer)
    if isinstance(value, AgentContext):
        return counter.context(value)
    if isinstance(value, Message):
        return counter.message(value)
    return counter.text(value)
