"""Real agent CLIs (Claude Code, Codex) against a scripted fake model API on loopback."""
