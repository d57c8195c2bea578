//! Cross-crate integration tests: see `tests/`. The webhook and the engine must agree on every object.
