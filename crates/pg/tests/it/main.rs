//! Integration tests against a real PostgreSQL (see `support.rs` for how one is found).

mod documents;
mod graph;
mod parity;
mod replica;
mod shards;
mod support;
mod tls;
