//! Integration tests of the service: the API through the router (no sockets), documents,
//! spaces and per-space access, limits, the OpenAPI document and `docs/API.md`, the MCP loop,
//! a space over PostgreSQL (`postgres`), the page in a real headless Chromium, and a load
//! test over real TCP (`load`).

mod access;
mod api;
mod browser;
mod client;
mod docs;
mod documents;
mod errors;
mod load;
mod mcp;
mod postgres;
mod spaces;
mod support;
