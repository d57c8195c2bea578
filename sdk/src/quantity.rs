//! Exact integer values of Kubernetes quantities, in the units Kueue's scheduler counts in.
//!
//! Kueue keeps `cpu` in milli-units (`MilliValue`) and every other resource in base units (`Value`, rounded up). The
//! parser here is exact: it works on the decimal digits, never through floating point.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use thiserror::Error;

/// Why a quantity could not be turned into an integer.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum QuantityError {
    /// The string is not a Kubernetes quantity.
    #[error("quantity {value:?} for resource {resource:?} is not valid: {reason}")]
    Invalid {
        /// Resource name.
        resource: String,
        /// The offending string.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The value does not fit in an i64 in the scheduler's unit.
    #[error("quantity {value:?} for resource {resource:?} overflows a 64-bit integer")]
    Overflow {
        /// Resource name.
        resource: String,
        /// The offending string.
        value: String,
    },
}

/// The `cpu` resource, counted in milli-units.
pub const CPU: &str = "cpu";

/// Multiplier from a quantity's value to the scheduler unit of `resource` (1000 for cpu, else 1).
fn unit_scale(resource: &str) -> u32 {
    if resource == CPU { 3 } else { 0 }
}

/// Why a quantity with more significant digits than 128 bits hold does not parse exactly.
const TOO_MANY_DIGITS: &str = "too many significant digits";

/// A parsed quantity: `sign * mantissa * 10^exp10 * 2^exp2`.
struct Parsed {
    negative: bool,
    mantissa: u128,
    exp10: i64,
    exp2: u32,
}

fn parse(s: &str) -> Result<Parsed, &'static str> {
    let bytes = s.as_bytes();
    let mut i = 0;
    let mut negative = false;
    if let Some(&c) = bytes.first()
        && (c == b'+' || c == b'-')
    {
        negative = c == b'-';
        i = 1;
    }
    let int_start = i;
    while i < bytes.len() && bytes[i].is_ascii_digit() {
        i += 1;
    }
    let int_digits = &s[int_start..i];
    let mut frac_digits = "";
    if i < bytes.len() && bytes[i] == b'.' {
        i += 1;
        let frac_start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        frac_digits = &s[frac_start..i];
    }
    if int_digits.is_empty() && frac_digits.is_empty() {
        return Err("no digits");
    }
    let (exp10, exp2) = parse_suffix(&s[i..])?;

    // Trailing fractional zeros and leading zeros carry no value; dropping them keeps long but exact strings in range.
    let frac_digits = frac_digits.trim_end_matches('0');
    let mut mantissa: u128 = 0;
    for d in int_digits.bytes().chain(frac_digits.bytes()) {
        mantissa = mantissa
            .checked_mul(10)
            .and_then(|m| m.checked_add(u128::from(d - b'0')))
            .ok_or(TOO_MANY_DIGITS)?;
    }
    let frac_len = i64::try_from(frac_digits.len()).map_err(|_| "too many digits")?;
    Ok(Parsed {
        negative,
        mantissa,
        exp10: exp10 - frac_len,
        exp2,
    })
}

/// Returns (power of ten, power of two) of a suffix.
fn parse_suffix(suffix: &str) -> Result<(i64, u32), &'static str> {
    Ok(match suffix {
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
        _ => {
            let rest = suffix
                .strip_prefix('e')
                .or_else(|| suffix.strip_prefix('E'))
                .ok_or("unknown suffix")?;
            let digits = rest.strip_prefix(['+', '-']).unwrap_or(rest);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err("bad exponent");
            }
            // Exponents beyond this are far outside i64 either way; capping keeps the arithmetic bounded.
            let exp: i64 = rest.parse().unwrap_or(if rest.starts_with('-') {
                -10_000
            } else {
                10_000
            });
            (exp.clamp(-10_000, 10_000), 0)
        }
    })
}

/// The exact value of `q` in nano-units (the finest precision Kubernetes keeps), rounded away from zero below one
/// nano-unit and saturated to the i128 range, for comparing quantities of any size; None when `q` is malformed.
pub fn nano_value(q: &Quantity) -> Option<i128> {
    let s = q.0.trim();
    let p = match parse(s) {
        Ok(p) => p,
        Err(TOO_MANY_DIGITS) => {
            return Some(if s.starts_with('-') {
                -i128::MAX
            } else {
                i128::MAX
            });
        }
        Err(_) => return None,
    };
    if p.mantissa == 0 {
        return Some(0);
    }
    let scale = p.exp10 + 9;
    let shifted = p
        .mantissa
        .checked_shl(p.exp2)
        .filter(|x| x >> p.exp2 == p.mantissa);
    let magnitude = match shifted {
        None => u128::MAX,
        Some(x) if scale >= 0 => u32::try_from(scale)
            .ok()
            .and_then(|e| 10u128.checked_pow(e))
            .and_then(|f| x.checked_mul(f))
            .unwrap_or(u128::MAX),
        Some(x) => match u32::try_from(-scale)
            .ok()
            .and_then(|e| 10u128.checked_pow(e))
        {
            Some(den) => x.div_ceil(den),
            None => 1,
        },
    };
    let v = i128::try_from(magnitude).unwrap_or(i128::MAX);
    Some(if p.negative { -v } else { v })
}

/// Value of `q` in the scheduler unit of `resource`: milli-units for `cpu`, base units rounded up otherwise.
pub fn resource_value(resource: &str, q: &Quantity) -> Result<i64, QuantityError> {
    parse_value(resource, &q.0)
}

/// Like [`resource_value`], for a plain string.
pub fn parse_value(resource: &str, s: &str) -> Result<i64, QuantityError> {
    let invalid = |reason| QuantityError::Invalid {
        resource: resource.to_owned(),
        value: s.to_owned(),
        reason,
    };
    let overflow = || QuantityError::Overflow {
        resource: resource.to_owned(),
        value: s.to_owned(),
    };
    let p = parse(s).map_err(invalid)?;
    if p.mantissa == 0 {
        return Ok(0);
    }
    let exp10 = p.exp10 + i64::from(unit_scale(resource));
    let mut num = p.mantissa.checked_shl(p.exp2).ok_or_else(overflow)?;
    if (num >> p.exp2) != p.mantissa {
        return Err(overflow());
    }
    let magnitude: u128 = if exp10 >= 0 {
        let pow = u32::try_from(exp10).map_err(|_| overflow())?;
        let factor = 10u128.checked_pow(pow).ok_or_else(overflow)?;
        num = num.checked_mul(factor).ok_or_else(overflow)?;
        num
    } else {
        let pow = u32::try_from(-exp10).map_err(|_| overflow())?;
        match 10u128.checked_pow(pow) {
            // Ceiling division of a positive value.
            Some(den) => num.div_ceil(den),
            // The denominator exceeds any u128 numerator: a positive value below one unit.
            None => 1,
        }
    };
    if p.negative {
        // Rounding up a negative value moves it toward zero, hence the floor of the magnitude.
        let floor_mag = if exp10 >= 0 {
            magnitude
        } else {
            let pow = u32::try_from(-exp10).map_err(|_| overflow())?;
            10u128.checked_pow(pow).map_or(0, |den| num / den)
        };
        let v = i128::try_from(floor_mag).map_err(|_| overflow())?;
        i64::try_from(-v).map_err(|_| overflow())
    } else {
        i64::try_from(magnitude).map_err(|_| overflow())
    }
}

/// Whether values of `resource` read best with binary suffixes.
fn is_byte_resource(resource: &str) -> bool {
    resource == "memory"
        || resource == "ephemeral-storage"
        || resource == "storage"
        || resource.starts_with("hugepages-")
}

/// Inverse of [`resource_value`]: cpu as `1500m` or `2`, byte resources with the largest exact binary suffix, others
/// plain.
pub fn format_resource_value(resource: &str, v: i64) -> Quantity {
    if resource == CPU {
        return Quantity(if v % 1000 == 0 {
            format!("{}", v / 1000)
        } else {
            format!("{v}m")
        });
    }
    if is_byte_resource(resource) && v != 0 {
        for (shift, suffix) in [
            (60, "Ei"),
            (50, "Pi"),
            (40, "Ti"),
            (30, "Gi"),
            (20, "Mi"),
            (10, "Ki"),
        ] {
            let unit = 1i64 << shift;
            if v % unit == 0 {
                return Quantity(format!("{}{suffix}", v / unit));
            }
        }
    }
    Quantity(v.to_string())
}

/// A non-negative decimal amount as Kubernetes writes it, rounded down to nano-units (as Kueue v0.19 writes decayed
/// usage): the largest SI suffix that keeps it whole, e.g. `6828427124n`, `267m`, `4`, `2k`.
pub fn format_decimal_floor(v: f64) -> Quantity {
    if !(v.is_finite() && v > 0.0) {
        return Quantity("0".into());
    }
    // f64 keeps 15-16 significant digits; the nano floor of a larger value is its integer part's scale.
    let nanos = (v * 1e9).floor();
    let mut n = if nanos >= i128::MAX as f64 {
        i128::MAX
    } else {
        nanos as i128
    };
    if n == 0 {
        return Quantity("0".into());
    }
    let suffixes = ["n", "u", "m", "", "k", "M", "G", "T", "P", "E"];
    let mut i = 0;
    while i + 1 < suffixes.len() && n % 1000 == 0 {
        n /= 1000;
        i += 1;
    }
    Quantity(format!("{n}{}", suffixes[i]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn val(resource: &str, s: &str) -> Result<i64, QuantityError> {
        parse_value(resource, s)
    }

    #[test]
    fn decimal_floor_is_kueues_nano_rounding() {
        let f = |v: f64| format_decimal_floor(v).0;
        assert_eq!(f(6.828_427_124_746), "6828427124n");
        assert_eq!(f(0.267), "267m");
        assert_eq!(f(4.0), "4");
        assert_eq!(f(2000.0), "2k");
        assert_eq!(f(0.5), "500m");
        assert_eq!(f(1.5e-6), "1500n");
        assert_eq!(f(0.0), "0");
        assert_eq!(f(-1.0), "0");
        assert_eq!(f(1e-12), "0");
        // What it writes reads back (to a nano-unit).
        let q = format_decimal_floor(7.980_769_063_2);
        assert_eq!(nano_value(&q), Some(7_980_769_063));
    }

    #[test]
    fn nano_values_compare_any_size() {
        let n = |s: &str| nano_value(&Quantity(s.to_string()));
        assert_eq!(n("1"), Some(1_000_000_000));
        assert_eq!(n("1Ki"), Some(1024 * 1_000_000_000));
        assert_eq!(n("250m"), Some(250_000_000));
        assert_eq!(n("1n"), Some(1));
        assert_eq!(
            n("0.1n"),
            Some(1),
            "below one nano-unit rounds away from zero"
        );
        assert_eq!(n("-2"), Some(-2_000_000_000));
        assert_eq!(n("1e400"), Some(i128::MAX));
        assert_eq!(n(&"9".repeat(60)), Some(i128::MAX));
        assert_eq!(n("lots"), None);
    }

    #[test]
    fn cpu_is_milli() {
        assert_eq!(val("cpu", "1"), Ok(1000));
        assert_eq!(val("cpu", "1500m"), Ok(1500));
        assert_eq!(val("cpu", "0.5"), Ok(500));
        assert_eq!(val("cpu", ".25"), Ok(250));
        assert_eq!(val("cpu", "2k"), Ok(2_000_000));
        assert_eq!(val("cpu", "1u"), Ok(1), "sub-milli rounds up");
        assert_eq!(val("cpu", "100n"), Ok(1));
        assert_eq!(val("cpu", "0"), Ok(0));
        assert_eq!(val("cpu", "1e3"), Ok(1_000_000));
        assert_eq!(val("cpu", "1E-3"), Ok(1));
    }

    #[test]
    fn other_resources_are_base_units_rounded_up() {
        assert_eq!(val("memory", "1Gi"), Ok(1 << 30));
        assert_eq!(val("memory", "1.5Gi"), Ok(3 << 29));
        assert_eq!(val("memory", "1G"), Ok(1_000_000_000));
        assert_eq!(val("memory", "128974848"), Ok(128_974_848));
        assert_eq!(val("memory", "129e6"), Ok(129_000_000));
        assert_eq!(val("memory", "123Mi"), Ok(123 << 20));
        assert_eq!(val("nvidia.com/gpu", "500m"), Ok(1));
        assert_eq!(
            val("pods", "1.000000000000000000000000000000000000000000"),
            Ok(1)
        );
        assert_eq!(
            val("x", "8Ei"),
            Err(QuantityError::Overflow {
                resource: "x".into(),
                value: "8Ei".into()
            })
        );
        assert_eq!(val("x", "7Ei"), Ok(7 << 60));
        assert_eq!(val("x", "1e-400"), Ok(1));
        assert_eq!(val("x", "-1.5"), Ok(-1));
        assert!(matches!(
            val("x", "1e400"),
            Err(QuantityError::Overflow { .. })
        ));
        assert_eq!(val("x", "+2"), Ok(2));
    }

    #[test]
    fn garbage_is_an_error() {
        for s in [
            "", "abc", "1.2.3", "1Kb", " 1", "1 ", "1e", "1e+", "--1", "1mi", ".", "-", "1ee3",
            "0x10",
        ] {
            assert!(
                matches!(val("cpu", s), Err(QuantityError::Invalid { .. })),
                "{s:?} should be invalid"
            );
        }
    }

    #[test]
    fn formatting() {
        assert_eq!(format_resource_value("cpu", 1500).0, "1500m");
        assert_eq!(format_resource_value("cpu", 2000).0, "2");
        assert_eq!(format_resource_value("memory", 1 << 30).0, "1Gi");
        assert_eq!(format_resource_value("memory", 3 << 29).0, "1536Mi");
        assert_eq!(format_resource_value("memory", 1000).0, "1000");
        assert_eq!(format_resource_value("nvidia.com/gpu", 1024).0, "1024");
        assert_eq!(format_resource_value("memory", 0).0, "0");
    }

    proptest! {
        #[test]
        fn round_trip(v in any::<i64>(), r in prop::sample::select(vec!["cpu", "memory", "nvidia.com/gpu", "hugepages-2Mi"])) {
            let q = format_resource_value(r, v);
            prop_assert_eq!(resource_value(r, &q), Ok(v));
        }

        #[test]
        fn never_panics(s in "[-+]?[0-9.]{0,25}(e[-+]?[0-9]{0,4}|[numkMGTPE]i?)?") {
            let _ = parse_value("cpu", &s);
            let _ = parse_value("memory", &s);
        }
    }
}
