//! Sluice webhook.
