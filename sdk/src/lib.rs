//! Sluice SDK.
