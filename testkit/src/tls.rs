//! TLS for the test harness: a throw-away PKI made with rcgen at run time, and a
//! `redis-server` that serves TLS on a second loopback port next to its plain one.
//!
//! The plain port stays open so that `raw()`, `cli()` and the readiness probe work
//! unchanged; tests inspect Redis through it while the code under test talks TLS.

use std::net::{SocketAddr, TcpStream};
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

use crate::servers::{free_port, launch_with_config, RedisServer, MAX_TRIES, READY_TIMEOUT};

/// A test PKI: a CA, a server certificate it signed (SANs `127.0.0.1` and `localhost`), a
/// client certificate it signed (for mutual TLS), and an unrelated second CA (a wrong
/// root). All PEM, in memory and, for what `redis-server` reads, on disk.
pub struct TestPki {
    /// The CA that signed the server and client certificates.
    pub ca_pem: Vec<u8>,
    /// The server's certificate (signed by the CA).
    pub server_cert_pem: Vec<u8>,
    /// The server's private key (PKCS#8).
    pub server_key_pem: Vec<u8>,
    /// A client certificate signed by the CA, accepted with `--tls-auth-clients yes`.
    pub client_cert_pem: Vec<u8>,
    /// The client certificate's private key (PKCS#8).
    pub client_key_pem: Vec<u8>,
    /// A CA that signed nothing here: trusting only it must refuse the server.
    pub other_ca_pem: Vec<u8>,
    /// `ca_pem` on disk (`--tls-ca-cert-file`).
    pub ca_file: PathBuf,
    /// `server_cert_pem` on disk (`--tls-cert-file`).
    pub server_cert_file: PathBuf,
    /// `server_key_pem` on disk (`--tls-key-file`).
    pub server_key_file: PathBuf,
}

impl TestPki {
    /// Generates a fresh PKI (ECDSA P-256 keys) and writes its PEM files into `dir`, which
    /// must exist.
    pub fn generate(dir: &Path) -> TestPki {
        let (ca_params, ca_key, ca_pem) = new_ca("redis-rlock test CA");
        let issuer = Issuer::new(ca_params, ca_key);
        let (server_cert_pem, server_key_pem) = new_leaf(
            &issuer,
            "redis-rlock test server",
            &["127.0.0.1", "localhost"],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let (client_cert_pem, client_key_pem) = new_leaf(
            &issuer,
            "redis-rlock test client",
            &[],
            ExtendedKeyUsagePurpose::ClientAuth,
        );
        let (_, _, other_ca_pem) = new_ca("redis-rlock unrelated CA");

        let write = |name: &str, pem: &str| {
            let path = dir.join(name);
            std::fs::write(&path, pem).unwrap_or_else(|e| panic!("write {path:?}: {e}"));
            path
        };
        TestPki {
            ca_file: write("ca.crt", &ca_pem),
            server_cert_file: write("server.crt", &server_cert_pem),
            server_key_file: write("server.key", &server_key_pem),
            ca_pem: ca_pem.into_bytes(),
            server_cert_pem: server_cert_pem.into_bytes(),
            server_key_pem: server_key_pem.into_bytes(),
            client_cert_pem: client_cert_pem.into_bytes(),
            client_key_pem: client_key_pem.into_bytes(),
            other_ca_pem: other_ca_pem.into_bytes(),
        }
    }

    /// The server's trust settings for redis-rs: trust this PKI's CA, no client certificate.
    pub fn trust_ca(&self) -> redis::TlsCertificates {
        redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(self.ca_pem.clone()),
        }
    }

    /// Trust this PKI's CA and present its client certificate (mutual TLS).
    pub fn trust_ca_with_client_cert(&self) -> redis::TlsCertificates {
        redis::TlsCertificates {
            client_tls: Some(redis::ClientTlsConfig {
                client_cert: self.client_cert_pem.clone(),
                client_key: self.client_key_pem.clone(),
            }),
            root_cert: Some(self.ca_pem.clone()),
        }
    }
}

fn distinguished_name(common_name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    dn
}

/// A self-signed CA: its parameters and key (to sign with) and its certificate's PEM.
fn new_ca(common_name: &str) -> (CertificateParams, KeyPair, String) {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.distinguished_name = distinguished_name(common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let key = KeyPair::generate().expect("generate CA key");
    let pem = params.self_signed(&key).expect("self-sign CA").pem();
    (params, key, pem)
}

/// A leaf certificate signed by `issuer`: (certificate PEM, key PEM). Names that parse as
/// IP addresses become IP SANs, the others DNS SANs.
fn new_leaf(
    issuer: &Issuer<'_, KeyPair>,
    common_name: &str,
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
) -> (String, String) {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let mut params = CertificateParams::new(names).expect("leaf params");
    params.distinguished_name = distinguished_name(common_name);
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![usage];
    params.use_authority_key_identifier_extension = true;
    let key = KeyPair::generate().expect("generate leaf key");
    let cert = params.signed_by(&key, issuer).expect("sign leaf");
    (cert.pem(), key.serialize_pem())
}

/// A `redis-server` serving plain RESP on `port()` and TLS on `tls_port()`, both on
/// `127.0.0.1`, with certificates from its own [`TestPki`].
///
/// Derefs to [`RedisServer`] (`raw()`, `cli()`, `url()`, `kill()`, `restart()`, ... all use
/// the plain port). The PKI lives in its own temporary directory, not the server's, so
/// `restart()` (which wipes the server's directory) keeps TLS working; it is removed on
/// drop.
pub struct TlsRedis {
    server: RedisServer,
    tls_port: u16,
    pki: TestPki,
    pki_dir: PathBuf,
}

impl TlsRedis {
    /// Starts a TLS-enabled server. With `auth_clients`, the TLS port requires a client
    /// certificate signed by the PKI's CA (`--tls-auth-clients yes`); otherwise none is
    /// asked for (`no`).
    pub fn start(auth_clients: bool) -> TlsRedis {
        let pki_dir =
            std::env::temp_dir().join(format!("redis-rlock-test-pki-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&pki_dir).expect("create PKI temp dir");
        let pki = TestPki::generate(&pki_dir);

        let mut last_err = String::new();
        for _ in 0..MAX_TRIES {
            let port = free_port();
            let tls_port = loop {
                let p = free_port();
                if p != port {
                    break p;
                }
            };
            let extra: Vec<String> = [
                "--tls-port",
                &tls_port.to_string(),
                "--tls-cert-file",
                path_str(&pki.server_cert_file),
                "--tls-key-file",
                path_str(&pki.server_key_file),
                "--tls-ca-cert-file",
                path_str(&pki.ca_file),
                "--tls-auth-clients",
                if auth_clients { "yes" } else { "no" },
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            let dir = std::env::temp_dir()
                .join(format!("redis-rlock-test-{port}-{}", uuid::Uuid::new_v4()));
            std::fs::create_dir_all(&dir).expect("create redis temp dir");
            // `launch_with_config` returns once the plain port answers PING, and redis-server binds
            // all its listeners before it serves any, so the TLS port is bound too (a
            // taken TLS port makes it exit, which `launch_with_config` reports as an error).
            match launch_with_config(port, &dir, None, &extra) {
                Ok(child) => {
                    let server = RedisServer {
                        port,
                        dir,
                        extra,
                        config: None,
                        child: Mutex::new(Some(child)),
                    };
                    wait_for_tcp(&server, tls_port);
                    return TlsRedis {
                        server,
                        tls_port,
                        pki,
                        pki_dir,
                    };
                }
                Err(e) => {
                    last_err = e;
                    let _ = std::fs::remove_dir_all(&dir);
                }
            }
        }
        let _ = std::fs::remove_dir_all(&pki_dir);
        panic!("TLS redis-server failed to start after {MAX_TRIES} attempts: {last_err}");
    }

    /// The TLS port (stable across restarts).
    pub fn tls_port(&self) -> u16 {
        self.tls_port
    }

    /// `rediss://127.0.0.1:TLS_PORT` (the certificate has an IP SAN for it).
    pub fn tls_url(&self) -> String {
        format!("rediss://127.0.0.1:{}", self.tls_port)
    }

    /// `rediss://localhost:TLS_PORT` (the certificate has a DNS SAN for it; SNI is sent).
    pub fn tls_url_localhost(&self) -> String {
        format!("rediss://localhost:{}", self.tls_port)
    }

    /// `rediss://127.0.0.1:TLS_PORT/#insecure`: redis-rs accepts any certificate.
    pub fn tls_url_insecure(&self) -> String {
        format!("rediss://127.0.0.1:{}/#insecure", self.tls_port)
    }

    /// The certificates the server uses, and a client certificate and a wrong CA.
    pub fn pki(&self) -> &TestPki {
        &self.pki
    }

    /// A multiplexed async redis-rs connection over TLS, trusting the test CA (and, with
    /// `client_cert`, presenting the client certificate), with generous timeouts.
    pub async fn raw_tls(&self, client_cert: bool) -> redis::aio::MultiplexedConnection {
        let certs = if client_cert {
            self.pki.trust_ca_with_client_cert()
        } else {
            self.pki.trust_ca()
        };
        let client = redis::Client::build_with_tls(self.tls_url(), certs).expect("TLS client");
        client
            .get_multiplexed_async_connection_with_config(&generous_config())
            .await
            .expect("connect to the test redis-server over TLS")
    }
}

impl Deref for TlsRedis {
    type Target = RedisServer;
    fn deref(&self) -> &RedisServer {
        &self.server
    }
}

impl DerefMut for TlsRedis {
    fn deref_mut(&mut self) -> &mut RedisServer {
        &mut self.server
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        // The server (a field) is killed after this; it read its files at start-up.
        let _ = std::fs::remove_dir_all(&self.pki_dir);
    }
}

/// Connection and response timeouts of 5 s: room for TLS handshakes on a loaded machine.
pub fn generous_config() -> redis::AsyncConnectionConfig {
    redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(Duration::from_secs(5)))
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("temp paths are UTF-8")
}

/// Waits until `port` accepts TCP connections while `server` keeps running.
fn wait_for_tcp(server: &RedisServer, port: u16) {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        assert!(
            server.is_running(),
            "redis-server exited before its TLS port {port} opened"
        );
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "TLS port {port} not accepting connections within {READY_TIMEOUT:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
