//! Human durations ("90s", "1h30m", "1.5h") as the CLI, the Configuration, annotations and reports write them,
//! in the engine's milliseconds.

use crate::engine::Time;

/// A duration that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid duration {value:?}: {why} (expected e.g. \"90s\", \"15m\", \"1h30m\" or \"1.5h\")"
)]
pub struct DurationError {
    /// The text given.
    pub value: String,
    /// What is wrong with it.
    pub why: &'static str,
}

/// Parses "90", "90s", "15m", "2h", "1h30m", "1.5h", "250ms", "1d" into milliseconds.
pub fn parse_duration(text: &str) -> Result<Time, DurationError> {
    let err = |why| DurationError {
        value: text.to_string(),
        why,
    };
    let s = text.trim();
    if s.is_empty() {
        return Err(err("empty"));
    }
    if let Ok(secs) = s.parse::<f64>() {
        return to_millis(secs * 1000.0).ok_or_else(|| err("out of range"));
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err(err("expected a number"));
        }
        let value: f64 = rest[..num_len].parse().map_err(|_| err("bad number"))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit_ms = match &rest[..unit_len] {
            "ms" => 1.0,
            "s" => 1_000.0,
            "m" => 60_000.0,
            "h" => 3_600_000.0,
            "d" => 86_400_000.0,
            "" => return Err(err("a unit must follow each number")),
            _ => return Err(err("unknown unit")),
        };
        rest = &rest[unit_len..];
        total += value * unit_ms;
    }
    to_millis(total).ok_or_else(|| err("out of range"))
}

/// About 300 years: far beyond any simulation, and far from the end of Kubernetes' timestamps.
const MAX_MS: f64 = 1.0e13;

fn to_millis(ms: f64) -> Option<Time> {
    (ms.is_finite() && (0.0..MAX_MS).contains(&ms)).then(|| ms.round() as Time)
}

/// Formats milliseconds as a short human duration ("1h05m", "42s", "3m20s").
pub fn format_duration(ms: Time) -> String {
    let secs = ms / 1000;
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    match (h, m, s) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_compounds() {
        assert_eq!(parse_duration("90").unwrap(), 90_000);
        assert_eq!(parse_duration("90s").unwrap(), 90_000);
        assert_eq!(parse_duration("15m").unwrap(), 900_000);
        assert_eq!(parse_duration("1h30m").unwrap(), 5_400_000);
        assert_eq!(parse_duration("1.5h").unwrap(), 5_400_000);
        assert_eq!(parse_duration("250ms").unwrap(), 250);
        assert_eq!(parse_duration("1d").unwrap(), 86_400_000);
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "h", "5x", "-3s", "1e400", "3m5", "..s", "400000d"] {
            assert!(parse_duration(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn formats_short() {
        assert_eq!(format_duration(42_000), "42s");
        assert_eq!(format_duration(200_000), "3m20s");
        assert_eq!(format_duration(3_900_000), "1h05m");
    }
}
