//! Why a policy call produced no usable decision.

use thiserror::Error;

/// The class of a policy failure (used for metrics labels and fallback decisions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PolicyFailure {
    /// The module trapped (panic, unreachable, out-of-bounds access).
    Trap,
    /// The call ran past its deadline.
    Deadline,
    /// The module tried to grow memory past its cap.
    Memory,
    /// The module returned output that breaks the contract (wrong length, NaN, ...).
    Malformed,
    /// The module refused its configuration or input with a message.
    Rejected,
    /// The module is degraded after repeated failures and is not called.
    Degraded,
}

impl PolicyFailure {
    /// Stable lower-case name, used as a metric label value and in condition reasons.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Trap => "trap",
            Self::Deadline => "deadline",
            Self::Memory => "memory",
            Self::Malformed => "malformed",
            Self::Rejected => "rejected",
            Self::Degraded => "degraded",
        }
    }
}

/// A failed policy call: which policy, which class of failure, and a message for humans.
#[derive(Clone, Debug, Error, PartialEq)]
#[error("policy {policy}: {} : {message}", failure.as_str())]
pub struct PolicyError {
    /// Name of the policy (module name or built-in name).
    pub policy: String,
    /// Failure class.
    pub failure: PolicyFailure,
    /// What went wrong, for events and conditions.
    pub message: String,
}

impl PolicyError {
    /// Builds an error.
    pub fn new(
        policy: impl Into<String>,
        failure: PolicyFailure,
        message: impl Into<String>,
    ) -> Self {
        Self {
            policy: policy.into(),
            failure,
            message: message.into(),
        }
    }
}
