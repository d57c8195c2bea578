//! Prints Sluice's Kueue CRDs as multi-document YAML (`cargo run -p sluice-sdk --example print_crds`).

fn main() {
    print!("{}", sluice_sdk::kueue::crds::crds_yaml());
}
