//! Test support shared by the controller tests and benchmarks: an in-memory Kubernetes API server.

mod fake_api;

pub use fake_api::{FakeApi, FakeBody, Fault, Latency, RecordedRequest, collection_of};
