//! Integration tests of the service: the API through the router (no sockets), documents,
//! spaces, the OpenAPI document and `docs/API.md`, the MCP loop, and the page in a real
//! headless Chromium.

mod api;
mod browser;
mod docs;
mod documents;
mod errors;
mod mcp;
mod spaces;
mod support;
