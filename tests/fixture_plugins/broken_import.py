"""A plugin whose import fails, as a plugin with a missing dependency does."""

import not_a_real_dependency_of_anything  # noqa: F401
