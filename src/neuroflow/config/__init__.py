"""Configuration: schema loading, validation with helpful messages, defaults."""

from neuroflow.config.validation import (
    ConfigError,
    coerce_overrides,
    fill_defaults,
    load_config,
    load_schema,
    merge_defaults,
    sorted_config,
    unknown_key_message,
    validate_config,
)

__all__ = [
    "ConfigError",
    "coerce_overrides",
    "fill_defaults",
    "load_config",
    "load_schema",
    "merge_defaults",
    "sorted_config",
    "unknown_key_message",
    "validate_config",
]
