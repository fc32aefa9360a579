//! The server's one error enum, its mapping to HTTP statuses and wire codes, and the JSON
//! error body `{code, message, details}`.
//!
//! Every variant maps to a status with an exhaustive `match`: adding a variant does not
//! compile until someone decides how a client sees it. Internal faults are logged in full and
//! answered with a generic message, so paths and storage details never reach a client.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use finder_core::{SettingsError, SettingsErrorKind};
use finder_index::IndexError;
use finder_pg::PgError;
use finder_store::StoreError;
use serde_json::{json, Value};

/// Everything a request can fail with.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ServerError {
    /// The body is not the JSON the route expects, or a field is out of its range.
    #[error("{message}")]
    InvalidRequest {
        message: String,
        field: Option<String>,
    },
    /// The body is larger than the server accepts.
    #[error("request body is larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },
    /// A JSON body came without `Content-Type: application/json`.
    #[error("expected `Content-Type: application/json`")]
    UnsupportedMediaType,
    /// The query text is longer than the server accepts.
    #[error("query is {chars} characters long; the limit is {max}")]
    QueryTooLong { chars: usize, max: usize },
    /// A query-time setting was rejected (unknown key, out of range, wrong type).
    #[error("{0}")]
    Setting(SettingsError),
    /// An index-time setting was asked to change at query time.
    #[error("index-time setting `{key}` cannot change at query time (the index was built with {indexed})")]
    IndexTimeSetting { key: String, indexed: String },
    /// No or a wrong bearer token.
    #[error("missing or wrong bearer token (send `Authorization: Bearer <token>`)")]
    Unauthorized,
    /// The token is valid but does not grant what the route needs (`/metrics` needs a token
    /// that grants every space).
    #[error("this token does not grant every space; {what} needs a token that does (`TOKEN *` in the token file)")]
    Forbidden { what: String },
    /// The route does not exist.
    #[error("no route for {method} {path}")]
    UnknownRoute { method: String, path: String },
    /// The route exists but not with this method.
    #[error("{method} is not allowed on {path}")]
    MethodNotAllowed { method: String, path: String },
    /// The space named in the path is not served.
    #[error("no space named `{space}` (served: {served})")]
    UnknownSpace { space: String, served: String },
    /// The space has no index yet.
    #[error("space `{space}` has no index yet: run `finder index <INPUT> --index <DIR>`, or add documents with PUT …/documents/{{id}}")]
    NotBuilt { space: String },
    /// No document with this id was added through the API.
    #[error("no document `{id}` was added through the API in space `{space}` (sources indexed from files change when their files change)")]
    DocumentNotFound { space: String, id: String },
    /// The recommend target could not be found.
    #[error("no source `{id}` found in space `{space}`")]
    UnknownTarget { space: String, id: String },
    /// A document was refused by ingestion.
    #[error("document `{id}` was refused: {reason}")]
    InvalidDocument { id: String, reason: String },
    /// Another process (a `finder index` run) is writing the index.
    #[error("the index of space `{space}` is being written by another process; try again when it finishes")]
    Busy { space: String },
    /// More requests are in flight than the server takes at once.
    #[error("the server is handling {limit} requests already; try again shortly")]
    Overloaded { limit: usize },
    /// The request took longer than the per-request limit.
    #[error("the request took longer than {ms} ms and was stopped")]
    Timeout { ms: u64 },
    /// The space's PostgreSQL shards cannot be reached now (no connection within the pool's
    /// wait, or the server went away under the request); the detail goes to the log only.
    #[error("the storage of space `{space}` cannot be reached; try again shortly")]
    StoreUnavailable { space: String, detail: String },
    /// A fault of the server or its storage; the detail goes to the log only.
    #[error("internal error: {detail}")]
    Internal { detail: String },
}

impl ServerError {
    pub fn invalid(message: impl Into<String>) -> ServerError {
        ServerError::InvalidRequest {
            message: message.into(),
            field: None,
        }
    }

    pub fn invalid_field(field: &str, message: impl Into<String>) -> ServerError {
        ServerError::InvalidRequest {
            message: message.into(),
            field: Some(field.to_string()),
        }
    }

    pub fn internal(detail: impl std::fmt::Display) -> ServerError {
        ServerError::Internal {
            detail: detail.to_string(),
        }
    }

    /// An index error met while serving `space`. Storage faults are internal; settings and
    /// locking problems are the client's to act on.
    pub fn from_index(space: &str, error: IndexError) -> ServerError {
        match error {
            // An index of an earlier layout is built again by the next indexing run.
            IndexError::NotFound(_) | IndexError::Outdated { .. } => ServerError::NotBuilt {
                space: space.to_string(),
            },
            IndexError::Settings(e) => ServerError::Setting(e),
            IndexError::IndexTimeSetting { key, indexed } => {
                ServerError::IndexTimeSetting { key, indexed }
            }
            IndexError::Busy(_) => ServerError::Busy {
                space: space.to_string(),
            },
            IndexError::UnknownSource(id) => ServerError::UnknownTarget {
                space: space.to_string(),
                id,
            },
            e @ (IndexError::Input(_)
            | IndexError::Embedding { .. }
            | IndexError::Storage { .. }
            | IndexError::Io { .. }
            | IndexError::Corrupt { .. }
            | IndexError::GraphTexts(_)) => ServerError::internal(e),
        }
    }

    /// The answer for an error of either store.
    pub fn from_store(space: &str, error: StoreError) -> ServerError {
        match error {
            StoreError::Index(e) | StoreError::Pg(PgError::Settings(e)) => {
                ServerError::from_index(space, e)
            }
            StoreError::Pg(PgError::NotIndexed(_)) => ServerError::NotBuilt {
                space: space.to_string(),
            },
            StoreError::Pg(PgError::Busy(_)) => ServerError::Busy {
                space: space.to_string(),
            },
            StoreError::Pg(PgError::UnknownSource(id)) => ServerError::UnknownTarget {
                space: space.to_string(),
                id,
            },
            StoreError::Pg(e) if e.unavailable() => ServerError::StoreUnavailable {
                space: space.to_string(),
                detail: e.to_string(),
            },
            StoreError::Pg(
                e @ (PgError::Db { .. }
                | PgError::Input(_)
                | PgError::Mismatch { .. }
                | PgError::Config(_)
                | PgError::Unavailable { .. }),
            ) => ServerError::internal(e),
        }
    }

    /// The HTTP status a client gets.
    pub fn status(&self) -> StatusCode {
        match self {
            ServerError::InvalidRequest { .. }
            | ServerError::QueryTooLong { .. }
            | ServerError::Setting(_)
            | ServerError::IndexTimeSetting { .. }
            | ServerError::InvalidDocument { .. } => StatusCode::BAD_REQUEST,
            ServerError::Unauthorized => StatusCode::UNAUTHORIZED,
            ServerError::Forbidden { .. } => StatusCode::FORBIDDEN,
            ServerError::UnknownRoute { .. }
            | ServerError::UnknownSpace { .. }
            | ServerError::DocumentNotFound { .. }
            | ServerError::UnknownTarget { .. } => StatusCode::NOT_FOUND,
            ServerError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ServerError::NotBuilt { .. } | ServerError::Busy { .. } => StatusCode::CONFLICT,
            ServerError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ServerError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ServerError::Timeout { .. }
            | ServerError::Overloaded { .. }
            | ServerError::StoreUnavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ServerError::Internal { .. } => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The stable machine-readable code in the error body.
    pub fn code(&self) -> &'static str {
        match self {
            ServerError::InvalidRequest { .. } => "invalid_request",
            ServerError::PayloadTooLarge { .. } => "payload_too_large",
            ServerError::UnsupportedMediaType => "unsupported_media_type",
            ServerError::QueryTooLong { .. } => "query_too_long",
            ServerError::Setting(_) => "invalid_setting",
            ServerError::IndexTimeSetting { .. } => "index_time_setting",
            ServerError::Unauthorized => "unauthorized",
            ServerError::Forbidden { .. } => "forbidden",
            ServerError::UnknownRoute { .. } => "not_found",
            ServerError::MethodNotAllowed { .. } => "method_not_allowed",
            ServerError::UnknownSpace { .. } => "unknown_space",
            ServerError::NotBuilt { .. } => "index_not_built",
            ServerError::DocumentNotFound { .. } => "document_not_found",
            ServerError::UnknownTarget { .. } => "unknown_target",
            ServerError::InvalidDocument { .. } => "invalid_document",
            ServerError::Busy { .. } => "index_busy",
            ServerError::Timeout { .. } => "timeout",
            ServerError::Overloaded { .. } => "overloaded",
            ServerError::StoreUnavailable { .. } => "storage_unavailable",
            ServerError::Internal { .. } => "internal",
        }
    }

    /// What a client may read besides the message: the key, value and range of a setting,
    /// the offending field, the limit that was hit.
    pub fn details(&self) -> Value {
        match self {
            ServerError::InvalidRequest { field, .. } => match field {
                Some(f) => json!({ "field": f }),
                None => json!({}),
            },
            ServerError::PayloadTooLarge { limit } => json!({ "limit_bytes": limit }),
            ServerError::QueryTooLong { chars, max } => json!({ "chars": chars, "max": max }),
            ServerError::Setting(e) => setting_details(e),
            ServerError::IndexTimeSetting { key, indexed } => {
                json!({ "key": key, "indexed": indexed })
            }
            ServerError::UnknownSpace { space, .. } | ServerError::NotBuilt { space } => {
                json!({ "space": space })
            }
            ServerError::DocumentNotFound { space, id }
            | ServerError::UnknownTarget { space, id } => json!({ "space": space, "id": id }),
            ServerError::InvalidDocument { id, reason } => json!({ "id": id, "reason": reason }),
            ServerError::Busy { space } | ServerError::StoreUnavailable { space, .. } => {
                json!({ "space": space, "retry": true })
            }
            ServerError::Timeout { ms } => json!({ "limit_ms": ms }),
            ServerError::Overloaded { limit } => json!({ "limit_in_flight": limit, "retry": true }),
            ServerError::Forbidden { what } => json!({ "route": what }),
            ServerError::UnknownRoute { method, path }
            | ServerError::MethodNotAllowed { method, path } => {
                json!({ "method": method, "path": path })
            }
            ServerError::UnsupportedMediaType
            | ServerError::Unauthorized
            | ServerError::Internal { .. } => json!({}),
        }
    }

    /// The message a client reads: the error's own text, except for internal faults.
    pub fn public_message(&self) -> String {
        match self {
            ServerError::Internal { .. } => {
                "internal error; the server log has the details".to_string()
            }
            other => other.to_string(),
        }
    }

    /// The `{code, message, details}` body.
    pub fn body(&self) -> Value {
        let body = crate::wire::ErrorBody {
            code: self.code().to_string(),
            message: self.public_message(),
            details: self.details(),
        };
        serde_json::to_value(body).expect("an error body serialises")
    }
}

fn setting_details(e: &SettingsError) -> Value {
    let mut details = json!({ "key": e.key, "origin": e.origin });
    let extra = match &e.kind {
        SettingsErrorKind::UnknownKey { suggestion } => {
            json!({ "reason": "unknown_key", "suggestion": suggestion })
        }
        SettingsErrorKind::OutOfRange { value, range } => {
            json!({ "reason": "out_of_range", "value": value, "range": range })
        }
        SettingsErrorKind::Invalid { value, expected } => {
            json!({ "reason": "invalid", "value": value, "expected": expected })
        }
        SettingsErrorKind::Syntax { message } => {
            json!({ "reason": "syntax", "syntax": message })
        }
    };
    if let (Some(d), Some(x)) = (details.as_object_mut(), extra.as_object()) {
        d.extend(x.clone());
    }
    details
}

/// What an overloaded server asks a client to wait, in seconds: requests last milliseconds, so
/// one second is long enough for the crowd to thin.
const RETRY_AFTER_SECS: &str = "1";

impl IntoResponse for ServerError {
    fn into_response(self) -> Response {
        match &self {
            ServerError::Internal { detail } => {
                tracing::error!(status = %self.status(), "internal error: {detail}");
            }
            ServerError::StoreUnavailable { space, detail } => {
                tracing::warn!(status = %self.status(), space, "storage unavailable: {detail}");
            }
            _ => {}
        }
        let status = self.status();
        let mut response = (status, axum::Json(self.body())).into_response();
        match &self {
            ServerError::Unauthorized => {
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"finder\""),
                );
            }
            ServerError::Overloaded { .. } | ServerError::StoreUnavailable { .. } => {
                response.headers_mut().insert(
                    header::RETRY_AFTER,
                    HeaderValue::from_static(RETRY_AFTER_SECS),
                );
            }
            _ => {}
        }
        response
    }
}

pub type Result<T, E = ServerError> = std::result::Result<T, E>;
