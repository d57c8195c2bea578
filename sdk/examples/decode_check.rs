//! Decodes every Kueue document in the YAML files given as arguments and reports failures.

use serde::Deserialize;

fn main() {
    let mut ok = 0;
    let mut failed = 0;
    for path in std::env::args().skip(1) {
        let Ok(text) = std::fs::read_to_string(&path) else {
            eprintln!("{path}: unreadable");
            continue;
        };
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let Ok(value) = serde_json::Value::deserialize(doc) else {
                continue;
            };
            let api = value
                .get("apiVersion")
                .and_then(|v| v.as_str())
                .unwrap_or_default();
            if !api.starts_with("kueue.x-k8s.io/") {
                continue;
            }
            match sluice_sdk::kueue::decode::decode(value) {
                Ok(_) => ok += 1,
                Err(e) => {
                    failed += 1;
                    println!("{path}: {e}");
                }
            }
        }
    }
    println!("decoded {ok}, failed {failed}");
}
