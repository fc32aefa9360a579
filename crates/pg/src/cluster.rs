//! Where the data lives: the shards, each with one URL for writes and a list for reads, and
//! which shard holds a source.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use finder_core::SourceKey;
use postgres::config::{Host, SslMode};
use postgres::types::ToSql;
use postgres::{Client, Row, Statement};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use serde::{Deserialize, Serialize};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{db, PgError, Result};

/// One shard: a PostgreSQL database (on its own server or not).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardUrls {
    /// The primary: indexing runs write here.
    pub write: String,
    /// Streaming replicas queries read from, tried in turn (a query node starts at a place
    /// given by its process id, so nodes spread over them), then the primary.
    #[serde(default)]
    pub read: Vec<String>,
}

/// The backend's configuration (`backend = "postgres"`): the shards, in a fixed order. A
/// source lives on shard `source_key mod shards`, so the list may not be reordered or grown
/// without re-indexing (each shard records its place and refuses another).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PgConfig {
    pub shards: Vec<ShardUrls>,
    /// PEM certificates to trust besides the web's roots (`storage.tls_ca`): a private CA's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_ca: Option<PathBuf>,
}

impl PgConfig {
    /// One database for everything, read and written through `url`.
    pub fn single(url: &str) -> PgConfig {
        PgConfig {
            shards: vec![ShardUrls {
                write: url.to_string(),
                read: Vec::new(),
            }],
            tls_ca: None,
        }
    }

    /// The shards `[storage]` names (`storage.urls`, `storage.read_urls`).
    pub fn from_settings(storage: &finder_core::StorageSettings) -> Result<PgConfig> {
        if storage.backend != finder_core::StorageBackend::Postgres {
            return Err(PgError::Config(
                "storage.backend is not \"postgres\"".into(),
            ));
        }
        let config = PgConfig {
            shards: storage
                .urls
                .iter()
                .enumerate()
                .map(|(i, url)| ShardUrls {
                    write: url.clone(),
                    read: storage.read_urls.get(i).cloned().unwrap_or_default(),
                })
                .collect(),
            tls_ca: (!storage.tls_ca.is_empty()).then(|| PathBuf::from(&storage.tls_ca)),
        };
        config.validate()?;
        Ok(config)
    }

    pub fn validate(&self) -> Result<()> {
        if self.shards.is_empty() {
            return Err(PgError::Config("no shards configured".into()));
        }
        for (i, s) in self.shards.iter().enumerate() {
            if s.write.trim().is_empty() {
                return Err(PgError::Config(format!("shard {i} has no write URL")));
            }
        }
        Ok(())
    }

    /// The URLs a query node reads shard `shard` from, in the order to try them: its replicas
    /// (starting at one given by the process id, so nodes spread over them), then the primary,
    /// so queries go on when every replica is gone.
    pub(crate) fn read_urls(&self, shard: usize) -> Vec<&str> {
        let s = &self.shards[shard];
        let start = std::process::id() as usize % s.read.len().max(1);
        let mut urls: Vec<&str> = (s.read[start..].iter().chain(&s.read[..start]))
            .map(String::as_str)
            .collect();
        urls.push(&s.write);
        urls
    }
}

/// The shard that holds a source: stable because source keys are.
pub fn shard_of(source: SourceKey, shards: usize) -> usize {
    (source.0 % shards as u64) as usize
}

/// How connections are secured: TLS by rustls, trusting the web's root certificates and
/// those of `storage.tls_ca`, the server's name checked against its certificate.
#[derive(Clone)]
pub(crate) struct Tls(MakeRustlsConnect);

impl Tls {
    /// Trusts the web's roots and, when given, the PEM certificates in the file `ca`.
    pub(crate) fn new(ca: Option<&Path>) -> Result<Tls> {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        if let Some(ca) = ca {
            let bad =
                |why: String| PgError::Config(format!("storage.tls_ca ({}): {why}", ca.display()));
            let certs = CertificateDer::pem_file_iter(ca)
                .map_err(|e| bad(e.to_string()))?
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| bad(e.to_string()))?;
            if certs.is_empty() {
                return Err(bad("no PEM certificate in it".into()));
            }
            for cert in certs {
                roots.add(cert).map_err(|e| bad(e.to_string()))?;
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| PgError::Config(format!("TLS: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Tls(MakeRustlsConnect::new(config)))
    }
}

/// Whether TLS is required for `url`: `sslmode=disable` or `require` when it says so;
/// otherwise (no `sslmode`, or `prefer`, which could fall back to the clear) off for a server
/// on this machine (loopback addresses, `localhost`, Unix sockets) and required for any
/// other, so that a password or a query never crosses a network in the clear by default.
fn ssl_mode(config: &postgres::Config) -> SslMode {
    match config.get_ssl_mode() {
        SslMode::Prefer => {}
        explicit => return explicit,
    }
    let local = config.get_hosts().iter().all(|host| match host {
        Host::Tcp(name) => {
            name == "localhost" || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
        }
        Host::Unix(_) => true,
    });
    if local {
        SslMode::Disable
    } else {
        SslMode::Require
    }
}

/// Opens a connection to `url`, over TLS as [`ssl_mode`] says.
pub(crate) fn connect(url: &str, shard: usize, tls: &Tls) -> Result<Client> {
    let mut config: postgres::Config = url
        .parse()
        .map_err(db(format!("shard {shard}: reading its URL")))?;
    config.ssl_mode(ssl_mode(&config));
    config
        .connect(tls.0.clone())
        .map_err(db(format!("shard {shard}: connecting")))
}

/// Connects to the first reachable URL of `urls`.
pub(crate) fn connect_any(urls: &[&str], shard: usize, tls: &Tls) -> Result<Client> {
    let mut last = None;
    for url in urls {
        match connect(url, shard, tls) {
            Ok(c) => return Ok(c),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| PgError::Config(format!("shard {shard} has no URL"))))
}

/// How many read connections a query node keeps per shard, at most: a query holds one per
/// shard from its start to its end, so this many queries run at once.
pub(crate) const POOL_SIZE: u32 = 16;

/// How long a query waits for a shard's connection (a free one, or a new one made).
const POOL_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// A shard's read connections, each to the first of its read URLs that answers: a replica
/// gone makes the next connection go to the next one (or the primary).
pub(crate) struct ReadConnections {
    urls: Vec<String>,
    shard: usize,
    tls: Tls,
}

pub(crate) type Pool = r2d2::Pool<ReadConnections>;
pub(crate) type Pooled = r2d2::PooledConnection<ReadConnections>;

/// A read connection with its prepared statements: a statement text is parsed and planned by
/// the server once per connection, and each later run is one round trip instead of two.
pub(crate) struct Conn {
    /// Taken only by `drop`.
    client: Option<Client>,
    statements: HashMap<String, Statement>,
}

type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

impl Conn {
    pub(crate) fn client(&mut self) -> &mut Client {
        self.client
            .as_mut()
            .expect("a connection's client is taken only when it is dropped")
    }

    fn statement(&mut self, sql: &str) -> std::result::Result<Statement, postgres::Error> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let statement = self.client().prepare(sql)?;
        self.statements.insert(sql.to_string(), statement.clone());
        Ok(statement)
    }

    pub(crate) fn query(
        &mut self,
        sql: &str,
        params: Params<'_>,
    ) -> std::result::Result<Vec<Row>, postgres::Error> {
        let statement = self.statement(sql)?;
        self.client().query(&statement, params)
    }

    pub(crate) fn query_opt(
        &mut self,
        sql: &str,
        params: Params<'_>,
    ) -> std::result::Result<Option<Row>, postgres::Error> {
        let statement = self.statement(sql)?;
        self.client().query_opt(&statement, params)
    }

    pub(crate) fn execute(
        &mut self,
        sql: &str,
        params: Params<'_>,
    ) -> std::result::Result<u64, postgres::Error> {
        let statement = self.statement(sql)?;
        self.client().execute(&statement, params)
    }

    /// Runs statements without parameters as they are (no preparing).
    pub(crate) fn batch_execute(&mut self, sql: &str) -> std::result::Result<(), postgres::Error> {
        self.client().batch_execute(sql)
    }
}

impl Drop for Conn {
    /// `postgres::Client` blocks on a runtime of its own when dropped, which panics on a thread
    /// that drives a tokio runtime (a server dropping its spaces as it shuts down): there the
    /// client is dropped on a thread of its own.
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        if tokio::runtime::Handle::try_current().is_ok() {
            let _ = std::thread::Builder::new()
                .name("finder-pg close".into())
                .spawn(move || drop(client));
        }
    }
}

impl r2d2::ManageConnection for ReadConnections {
    type Connection = Conn;
    type Error = PgError;

    fn connect(&self) -> Result<Conn> {
        let urls: Vec<&str> = self.urls.iter().map(String::as_str).collect();
        Ok(Conn {
            client: Some(connect_any(&urls, self.shard, &self.tls)?),
            statements: HashMap::new(),
        })
    }

    fn is_valid(&self, conn: &mut Conn) -> Result<()> {
        conn.client()
            .simple_query("")
            .map(|_| ())
            .map_err(db(format!("shard {}: checking a connection", self.shard)))
    }

    fn has_broken(&self, conn: &mut Conn) -> bool {
        conn.client().is_closed()
    }
}

/// The pool of shard `shard`'s read connections. None is made before the first query asks;
/// a connection is not tested when taken (a query that finds it broken retries on a new one).
pub(crate) fn read_pool(config: &PgConfig, shard: usize, tls: &Tls) -> Pool {
    let manager = ReadConnections {
        tls: tls.clone(),
        urls: config
            .read_urls(shard)
            .into_iter()
            .map(str::to_string)
            .collect(),
        shard,
    };
    r2d2::Pool::builder()
        .max_size(POOL_SIZE)
        .min_idle(Some(0))
        .test_on_check_out(false)
        .connection_timeout(POOL_WAIT)
        .error_handler(Box::new(r2d2::NopErrorHandler))
        .build_unchecked(manager)
}

/// A connection from `pool`, or why none came within [`POOL_WAIT`].
pub(crate) fn take(pool: &Pool, shard: usize) -> Result<Pooled> {
    pool.get().map_err(|e| PgError::Unavailable {
        shard,
        reason: e.to_string(),
    })
}

/// `url` with its database replaced by `db` (the query string kept): how the tests and the
/// benchmark make a fresh database per shard on one server.
pub fn with_database(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let host_end = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    let mut out = format!("{}/{db}", &base[..host_end]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_replaced_in_urls() {
        assert_eq!(
            with_database("postgresql://postgres@127.0.0.1:5432/postgres", "x"),
            "postgresql://postgres@127.0.0.1:5432/x"
        );
        assert_eq!(
            with_database("postgresql://h:1?sslmode=disable", "x"),
            "postgresql://h:1/x?sslmode=disable"
        );
    }

    #[test]
    fn tls_is_required_off_this_machine_unless_the_url_says() {
        let mode = |url: &str| ssl_mode(&url.parse().unwrap());
        assert_eq!(mode("postgresql://u@127.0.0.1:5432/db"), SslMode::Disable);
        assert_eq!(mode("postgresql://u@localhost/db"), SslMode::Disable);
        assert_eq!(mode("postgresql://u@[::1]:5432/db"), SslMode::Disable);
        assert_eq!(mode("postgresql://u@db.example.com/db"), SslMode::Require);
        assert_eq!(mode("postgresql://u@10.0.0.7:5432/db"), SslMode::Require);
        assert_eq!(
            mode("postgresql://u@10.0.0.7/db?sslmode=disable"),
            SslMode::Disable
        );
        assert_eq!(mode("host=10.0.0.7 sslmode = disable"), SslMode::Disable);
        assert_eq!(
            mode("postgresql://u@127.0.0.1/db?sslmode=require"),
            SslMode::Require
        );
        // `prefer` could fall back to the clear: off this machine it is `require`.
        assert_eq!(
            mode("postgresql://u@db.example.com/db?sslmode=prefer"),
            SslMode::Require
        );
        assert_eq!(mode("host=db.example.com user=u"), SslMode::Require);
    }

    #[test]
    fn sources_spread_over_shards_stably() {
        let key = finder_index::source_key("notes/a.md");
        assert_eq!(shard_of(key, 3), shard_of(key, 3));
        assert_eq!(shard_of(key, 1), 0);
        let mut counts = [0usize; 4];
        for i in 0..400 {
            counts[shard_of(finder_index::source_key(&format!("n{i}.md")), 4)] += 1;
        }
        assert!(counts.iter().all(|&c| c > 60), "{counts:?}");
    }

    #[test]
    fn config_is_validated_and_reads_fall_back_to_the_primary() {
        assert!(PgConfig {
            shards: vec![],
            tls_ca: None
        }
        .validate()
        .is_err());
        let c = PgConfig::single("postgresql://u@h/db");
        c.validate().unwrap();
        assert_eq!(c.read_urls(0), vec!["postgresql://u@h/db"]);
        let r = PgConfig {
            shards: vec![ShardUrls {
                write: "w".into(),
                read: vec!["r1".into(), "r2".into()],
            }],
            tls_ca: None,
        };
        // The replicas in an order of the process's, then the primary as the last resort.
        let mut urls = r.read_urls(0);
        assert_eq!(urls.pop(), Some("w"));
        urls.sort();
        assert_eq!(urls, vec!["r1", "r2"]);
    }
}
