"""The pricing profiles the bench prices calls with: `compactkit.pricing`, named here as well."""

from __future__ import annotations

from ..pricing import PROFILES, PricingProfile, get_profile

__all__ = ["PROFILES", "PricingProfile", "get_profile"]
