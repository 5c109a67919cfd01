"""Adapters for the agent frameworks compactkit drops into; each needs its framework installed
(`pip install 'compactkit[langchain]'` for `compactkit.integrations.langchain`)."""
