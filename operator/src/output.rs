//! How the `sluice` commands print: one output format flag, JSON/YAML encoding and aligned columns, shared
//! by the cluster commands and the simulator so both print alike.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::{Value, json};

/// How to print results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// A readable summary.
    Table,
    /// JSON.
    Json,
    /// YAML.
    Yaml,
}

/// Output that could not be encoded.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// As JSON.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// As YAML.
    #[error("{0}")]
    Yaml(#[from] serde_yaml::Error),
}

/// One value in JSON or YAML (JSON for `Table`, whose callers print their own tables).
pub fn encode<E: From<OutputError>>(value: &Value, format: OutputFormat) -> Result<String, E> {
    let text = match format {
        OutputFormat::Yaml => serde_yaml::to_string(value).map_err(OutputError::from)?,
        _ => serde_json::to_string_pretty(value).map_err(OutputError::from)? + "\n",
    };
    Ok(text)
}

/// The objects as a `v1` List in JSON or YAML (as `kubectl get -o json|yaml` prints them).
pub fn list<T: Serialize, E: From<OutputError>>(
    items: &[T],
    format: OutputFormat,
) -> Result<String, E> {
    let items = items
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<Vec<Value>, _>>()
        .map_err(OutputError::from)?;
    encode(
        &json!({"apiVersion": "v1", "kind": "List", "items": items}),
        format,
    )
}

/// Rows as columns aligned to their widest cell, `gap` spaces apart; the last cell of a row is not padded.
pub fn columns(rows: &[Vec<String>], gap: usize) -> String {
    aligned(rows.iter().map(Vec::as_slice), gap)
}

/// A header and rows as kubectl prints a table (three spaces between columns).
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    aligned(
        std::iter::once(header.as_slice()).chain(rows.iter().map(Vec::as_slice)),
        3,
    )
}

/// The aligner behind [`columns`] and [`table`]: two passes over the rows, none copied.
fn aligned<'a>(rows: impl Iterator<Item = &'a [String]> + Clone, gap: usize) -> String {
    let mut widths = Vec::new();
    for r in rows.clone() {
        for (i, c) in r.iter().enumerate() {
            if widths.len() <= i {
                widths.push(0);
            }
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            if i + 1 == r.len() {
                line.push_str(c);
            } else {
                let _ = write!(line, "{c:<w$}{:gap$}", "", w = widths[i]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_to_the_widest_cell_and_leave_the_last_unpadded() {
        let rows = vec![
            vec!["a".to_string(), "bbb".to_string(), "c".to_string()],
            vec!["dddd".to_string(), "e".to_string(), "".to_string()],
        ];
        assert_eq!(columns(&rows, 2), "a     bbb  c\ndddd  e\n");
        assert_eq!(
            table(&["X", "Y"], &[vec!["1".into(), "2".into()]]),
            "X   Y\n1   2\n"
        );
    }

    #[test]
    fn lists_are_kubectl_lists() {
        let text: Result<String, OutputError> = list(&[json!({"a": 1})], OutputFormat::Json);
        let v: Value = serde_json::from_str(&text.unwrap_or_default()).unwrap_or_default();
        assert_eq!(v["kind"], "List");
        assert_eq!(v["items"][0]["a"], 1);
    }
}
