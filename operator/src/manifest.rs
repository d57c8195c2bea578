//! Reading Kubernetes manifests (multi-document YAML or JSON) from files, directories or embedded text.
//!
//! Every document keeps where it came from, so that any later error can name the file and document.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

/// Where a document came from: a file (or embedded name) and its 1-based index in that file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// File path or embedded example name.
    pub file: String,
    /// 1-based position of the document in the file (items of a `List` count as the list's position).
    pub document: usize,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (document {})", self.file, self.document)
    }
}

/// One manifest document with its origin.
#[derive(Clone, Debug)]
pub struct Document {
    /// Where it came from.
    pub origin: Origin,
    /// The parsed object.
    pub value: Value,
}

impl Document {
    /// `kind` of the object, if it is a string.
    pub fn kind(&self) -> Option<&str> {
        self.value.get("kind").and_then(Value::as_str)
    }

    /// `apiVersion` of the object, if it is a string.
    pub fn api_version(&self) -> Option<&str> {
        self.value.get("apiVersion").and_then(Value::as_str)
    }

    /// `metadata.name`, if it is a string.
    pub fn name(&self) -> Option<&str> {
        self.value.pointer("/metadata/name").and_then(Value::as_str)
    }

    /// `metadata.namespace`, if it is a string.
    pub fn namespace(&self) -> Option<&str> {
        self.value
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
    }

    /// "Kind ns/name" (or "Kind name") for messages.
    pub fn describe(&self) -> String {
        let kind = self.kind().unwrap_or("<no kind>");
        match (self.namespace(), self.name()) {
            (Some(ns), Some(n)) => format!("{kind} {ns}/{n}"),
            (None, Some(n)) => format!("{kind} {n}"),
            _ => format!("{kind} <unnamed>"),
        }
    }
}

/// A manifest that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file or directory could not be read.
    #[error("{path}: {error}")]
    Io {
        /// The path.
        path: String,
        /// The underlying error (in the message, so not a `source`).
        error: std::io::Error,
    },
    /// A document is not valid YAML/JSON.
    #[error("{origin}: not valid YAML or JSON: {message}")]
    Syntax {
        /// Where.
        origin: Origin,
        /// The parser's message.
        message: String,
    },
    /// A document is not a Kubernetes object.
    #[error("{origin}: {message}")]
    NotAnObject {
        /// Where.
        origin: Origin,
        /// What is wrong.
        message: String,
    },
}

/// Parses every document of one file's text. Empty documents are skipped; `kind: List` is flattened.
pub fn parse_documents(file: &str, text: &str) -> Result<Vec<Document>, ManifestError> {
    let mut out = Vec::new();
    for (i, de) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let origin = Origin {
            file: file.to_string(),
            document: i + 1,
        };
        let value = Value::deserialize(de).map_err(|e| ManifestError::Syntax {
            origin: origin.clone(),
            message: e.to_string(),
        })?;
        push_object(&mut out, origin, value)?;
    }
    Ok(out)
}

fn push_object(out: &mut Vec<Document>, origin: Origin, value: Value) -> Result<(), ManifestError> {
    match &value {
        Value::Null => Ok(()),
        Value::Object(map) => {
            if map
                .get("kind")
                .and_then(Value::as_str)
                .is_some_and(|k| k.ends_with("List"))
                && let Some(items) = map.get("items")
            {
                let Value::Array(items) = items else {
                    return Err(ManifestError::NotAnObject {
                        origin,
                        message: "field `items` of a List must be an array".into(),
                    });
                };
                for item in items {
                    push_object(out, origin.clone(), item.clone())?;
                }
                return Ok(());
            }
            for field in ["apiVersion", "kind"] {
                if !map.get(field).is_some_and(Value::is_string) {
                    return Err(ManifestError::NotAnObject {
                        origin,
                        message: format!("missing or non-string field `{field}`"),
                    });
                }
            }
            out.push(Document { origin, value });
            Ok(())
        }
        _ => Err(ManifestError::NotAnObject {
            origin,
            message: "a document must be a mapping with apiVersion and kind".into(),
        }),
    }
}

/// Reads a file, or every `.yaml`/`.yml`/`.json` file under a directory (recursively, in name order).
pub fn read_path(path: &Path) -> Result<Vec<Document>, ManifestError> {
    let io = |error| ManifestError::Io {
        path: path.display().to_string(),
        error,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.is_dir() {
        let mut files = Vec::new();
        collect_files(path, &mut files).map_err(io)?;
        let mut out = Vec::new();
        for f in files {
            out.extend(read_path(&f)?);
        }
        Ok(out)
    } else {
        let text = std::fs::read_to_string(path).map_err(io)?;
        parse_documents(&path.display().to_string(), &text)
    }
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let p = e.path();
        if p.is_dir() {
            collect_files(&p, out)?;
        } else if matches!(
            p.extension().and_then(|x| x.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
            out.push(p);
        }
    }
    Ok(())
}

/// Characters the API server draws a generated name's suffix from (no vowels, no look-alike digits).
const NAME_SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
/// Length of the suffix the API server appends to `metadata.generateName`.
const NAME_SUFFIX_LEN: usize = 5;
/// The longest prefix kept, so that prefix and suffix fit a 63-character name, as the API server truncates.
const MAX_GENERATED_PREFIX: usize = 63 - NAME_SUFFIX_LEN;

/// Names the documents that have `metadata.generateName` and no `metadata.name`, as the API server does on
/// `kubectl create` (the prefix, truncated to 58 characters, plus five characters from its alphabet). The suffix is
/// derived from the document's content and its position among documents of the same kind, namespace and prefix, so
/// the same input always gets the same names; it never repeats a name already in the input.
pub fn with_generated_names(docs: &[Document]) -> std::borrow::Cow<'_, [Document]> {
    use sha2::{Digest, Sha256};
    let needs_name = |d: &Document| {
        d.name().is_none_or(str::is_empty)
            && d.value
                .pointer("/metadata/generateName")
                .and_then(Value::as_str)
                .is_some_and(|p| !p.is_empty())
    };
    if !docs.iter().any(needs_name) {
        return std::borrow::Cow::Borrowed(docs);
    }
    let key = |d: &Document, name: &str| {
        (
            d.kind().unwrap_or_default().to_string(),
            d.namespace().unwrap_or_default().to_string(),
            name.to_string(),
        )
    };
    let mut taken: std::collections::BTreeSet<(String, String, String)> = docs
        .iter()
        .filter_map(|d| d.name().map(|n| key(d, n)))
        .collect();
    let mut out = docs.to_vec();
    let mut ordinal: std::collections::BTreeMap<(String, String, String), u64> = Default::default();
    for d in out.iter_mut().filter(|d| needs_name(d)) {
        let prefix = d
            .value
            .pointer("/metadata/generateName")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let prefix: String = prefix.chars().take(MAX_GENERATED_PREFIX).collect();
        let content = d.value.to_string();
        let n = ordinal.entry(key(d, &prefix)).or_default();
        let name = loop {
            let digest = Sha256::digest(format!("{n}\n{content}").as_bytes());
            *n += 1;
            let suffix: String = digest
                .iter()
                .take(NAME_SUFFIX_LEN)
                .map(|b| NAME_SUFFIX_ALPHABET[*b as usize % NAME_SUFFIX_ALPHABET.len()] as char)
                .collect();
            let name = format!("{prefix}{suffix}");
            if taken.insert(key(d, &name)) {
                break name;
            }
        };
        if let Some(meta) = d.value.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("name".into(), Value::String(name));
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_document_yaml_with_list_and_empty_docs() {
        let text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n---\n\
                    apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Namespace, metadata: {name: b}}\n";
        let docs = parse_documents("x.yaml", text).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].name(), Some("b"));
        assert_eq!(docs[1].origin.document, 3);
    }

    #[test]
    fn json_document_parses() {
        let docs = parse_documents(
            "x.json",
            r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n"}}"#,
        )
        .unwrap();
        assert_eq!(docs[0].describe(), "Namespace n");
    }

    #[test]
    fn missing_kind_names_document_and_field() {
        let err = parse_documents(
            "x.yaml",
            "apiVersion: v1\n---\napiVersion: v1\nmetadata: {}\n",
        )
        .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("x.yaml (document 1)"), "{msg}");
        assert!(msg.contains("`kind`"), "{msg}");
    }

    #[test]
    fn syntax_error_names_document() {
        let err = parse_documents(
            "bad.yaml",
            "apiVersion: v1\nkind: A\n---\nkind: [unclosed\n",
        )
        .unwrap_err();
        assert!(
            err.to_string().starts_with("bad.yaml (document 2)"),
            "{err}"
        );
    }
}
