//! Sluice operator.
