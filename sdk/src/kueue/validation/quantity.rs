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
    let s = q.0.trim();
    let (negative, rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let num_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (num, suffix) = rest.split_at(num_end);
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
        return None;
    }
    let (exp10, exp2): (i64, u32) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        other => {
            let e = other.strip_prefix(['e', 'E'])?;
            let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            (e.parse::<i64>().unwrap_or(i64::MAX).clamp(-100, 100), 0)
        }
    };
    // Digits as one integer m, so the value is m * 10^(exp10 - frac.len() + 9) * 2^exp2 nano-units.
    let frac = frac.trim_end_matches('0');
    let mut m: i128 = 0;
    let mut saturated = false;
    for d in int.bytes().chain(frac.bytes()) {
        match m
            .checked_mul(10)
            .and_then(|v| v.checked_add(i128::from(d - b'0')))
        {
            Some(v) => m = v,
            None => {
                saturated = true;
                break;
            }
        }
    }
    let scale = exp10 + 9 - i64::try_from(frac.len()).unwrap_or(i64::MAX);
    let mut v = if saturated || m == 0 {
        if saturated { i128::MAX } else { 0 }
    } else {
        let shifted = m.checked_shl(exp2).filter(|s| s >> exp2 == m);
        match shifted {
            None => i128::MAX,
            Some(x) if scale >= 0 => u32::try_from(scale)
                .ok()
                .and_then(|p| 10i128.checked_pow(p))
                .and_then(|f| x.checked_mul(f))
                .unwrap_or(i128::MAX),
            Some(x) => match u32::try_from(-scale)
                .ok()
                .and_then(|p| 10i128.checked_pow(p))
            {
                // Below one nano-unit Kubernetes rounds away from zero.
                Some(den) => (x + den - 1) / den,
                None => 1,
            },
        }
    };
    if negative {
        v = -v;
    }
    Some(v)
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
