//! Exact comparison of Kubernetes quantities, in nano-units (the finest precision Kubernetes keeps).

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::errors::{Errors, Path};

/// The API server's message for a malformed quantity.
pub const QUANTITY_MSG: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
/// Kubernetes' message for a negative value where one is not allowed.
pub const NEGATIVE_MSG: &str = "must be greater than or equal to 0";

/// The value of `q` in nano-units, rounded up and saturated to the i128 range; None when `q` is malformed.
pub fn nanos(q: &Quantity) -> Option<i128> {
    crate::quantity::nano_value(q)
}

/// Checks that `q` is well-formed and not negative; returns its nano value when well-formed.
pub fn non_negative(errs: &mut Errors, path: &Path, q: &Quantity) -> Option<i128> {
    match nanos(q) {
        None => {
            errs.invalid_str(path, &q.0, QUANTITY_MSG);
            None
        }
        Some(v) => {
            if v < 0 {
                errs.invalid_str(path, &q.0, NEGATIVE_MSG);
            }
            Some(v)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Option<i128> {
        nanos(&Quantity(s.to_owned()))
    }

    #[test]
    fn exact_across_suffixes() {
        assert_eq!(n("1500m"), n("1.5"));
        assert_eq!(n("1Gi"), Some(1_073_741_824_000_000_000));
        assert_eq!(n("1e3"), n("1k"));
        assert_eq!(n("-2n"), Some(-2));
        assert_eq!(n("0.1n"), Some(1), "below a nano-unit rounds up");
        assert_eq!(n("1Ei"), Some((1i128 << 60) * 1_000_000_000));
        assert_eq!(n("1e100"), Some(i128::MAX), "huge values saturate");
    }

    #[test]
    fn malformed() {
        for bad in ["", "abc", "1.2.3", "1Q", "1e", "--1", "."] {
            assert_eq!(n(bad), None, "{bad:?}");
        }
    }
}
