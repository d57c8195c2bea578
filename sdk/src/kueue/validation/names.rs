//! Kubernetes' name grammars: DNS-1123 labels and subdomains, qualified names (label keys, resource names) and label
//! values, with the messages the API server uses.

use super::errors::{Errors, Path};

const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and \
must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is \
'[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' \
or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is \
'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const NAME_PART_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and \
end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is \
'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' \
or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex \
used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => alnum(f) && alnum(l) && b.iter().all(|c| alnum(c) || *c == b'-'),
        _ => false,
    }
}

fn is_subdomain(s: &str) -> bool {
    s.split('.').all(is_label)
}

/// Problems with `s` as a DNS-1123 label (at most 63 characters); empty when valid.
pub fn dns_label(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    if s.len() > 63 {
        out.push("must be no more than 63 characters".to_owned());
    }
    if !is_label(s) {
        out.push(LABEL_MSG.to_owned());
    }
    out
}

/// Problems with `s` as a DNS-1123 subdomain (at most 253 characters); empty when valid.
pub fn dns_subdomain(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    if s.len() > 253 {
        out.push("must be no more than 253 characters".to_owned());
    }
    if !is_subdomain(s) {
        out.push(SUBDOMAIN_MSG.to_owned());
    }
    out
}

fn is_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// Problems with `s` as a qualified name (`[prefix/]name`, as label keys and resource names are); empty when valid.
pub fn qualified_name(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                out.push("prefix part must be non-empty".to_owned());
            } else {
                out.extend(
                    dns_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            out.push(
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end \
                 with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for \
                 validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix \
                 and '/' (e.g. 'example.com/MyName')"
                    .to_owned(),
            );
            return out;
        }
    };
    if name.is_empty() {
        out.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        out.push("name part must be no more than 63 characters".to_owned());
    }
    if !name.is_empty() && !is_name_part(name) {
        out.push(NAME_PART_MSG.to_owned());
    }
    out
}

/// Problems with `s` as a label value; empty when valid.
pub fn label_value(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    if s.len() > 63 {
        out.push("must be no more than 63 characters".to_owned());
    }
    if !s.is_empty() && !is_name_part(s) {
        out.push(LABEL_VALUE_MSG.to_owned());
    }
    out
}

/// Reports each problem of `check(value)` as an Invalid error at `path`.
pub fn check(errs: &mut Errors, path: &Path, value: &str, check: fn(&str) -> Vec<String>) {
    for m in check(value) {
        errs.invalid_str(path, value, m);
    }
}

/// Checks a reference to a cluster-scoped object (DNS subdomain, as Kueue's `*Reference` types require).
pub fn reference(errs: &mut Errors, path: &Path, value: &str) {
    check(errs, path, value, dns_subdomain);
}

/// Checks `metadata.name`: required, and a DNS subdomain as the API server requires of every custom resource.
pub fn object_name(errs: &mut Errors, name: Option<&str>) {
    let path = Path::new("metadata").child("name");
    match name {
        None | Some("") => errs.required(&path, "name or generateName is required"),
        Some(n) => check(errs, &path, n, dns_subdomain),
    }
}

/// Checks a label map: keys are qualified names, values label values.
pub fn labels<'a>(
    errs: &mut Errors,
    path: &Path,
    map: impl IntoIterator<Item = (&'a String, &'a String)>,
) {
    for (k, v) in map {
        check(errs, path, k, qualified_name);
        check(errs, path, v, label_value);
    }
}

/// Checks an annotation map: keys are lowercase qualified names and the total size stays under 256 KiB.
pub fn annotations<'a>(
    errs: &mut Errors,
    path: &Path,
    map: impl IntoIterator<Item = (&'a String, &'a String)>,
) {
    let mut total = 0usize;
    for (k, v) in map {
        check(errs, path, &k.to_lowercase(), qualified_name);
        total += k.len() + v.len();
    }
    const MAX: usize = 256 * 1024;
    if total > MAX {
        errs.invalid(path, "", format!("may not be more than {MAX} bytes"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grammars() {
        assert!(dns_label("a-1").is_empty());
        assert!(!dns_label("a.b").is_empty());
        assert_eq!(
            dns_label(&"a".repeat(64)),
            ["must be no more than 63 characters"]
        );
        assert!(dns_subdomain("a.b-c.d").is_empty());
        assert!(!dns_subdomain("a..b").is_empty());
        assert!(qualified_name("example.com/Name_1.x").is_empty());
        assert_eq!(qualified_name("/x"), ["prefix part must be non-empty"]);
        assert_eq!(qualified_name("a/"), ["name part must be non-empty"]);
        assert!(!qualified_name("a/b/c").is_empty());
        assert!(label_value("").is_empty());
        assert!(!label_value("-x").is_empty());
    }

    #[test]
    fn annotation_size() {
        let big = "v".repeat(256 * 1024);
        let map = std::collections::BTreeMap::from([("k".to_owned(), big)]);
        let mut errs = Errors::default();
        annotations(&mut errs, &Path::new("a"), &map);
        assert_eq!(errs.0.len(), 1);
        assert_eq!(errs.0[0].message, "may not be more than 262144 bytes");
    }
}
