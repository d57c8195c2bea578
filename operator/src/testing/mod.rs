//! Test support shared by the controller tests and benchmarks: an in-memory Kubernetes API server.

mod fake_api;

pub use fake_api::{FakeApi, FakeBody, Fault, RecordedRequest, collection_of};
