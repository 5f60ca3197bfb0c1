//! What a Sentinel client connects with: the sentinels, the name of the master they watch,
//! and how a connection to whichever node they name is made (credentials, database, TLS).
//!
//! The sentinels' URLs carry the sentinels' credentials; the master is reached with the same
//! ones, as Redisson's `password` serves both unless `sentinelPassword` is set, unless
//! [`ClientBuilder::master_credentials`](crate::ClientBuilder::master_credentials) gives
//! its own. The database number of the first URL is the master's: sentinels have no
//! databases, and are always asked on database 0.

use std::fmt;

use crate::config::server_url::ServerUrl;
use crate::config::settings::{at_address, client_with_tls, TlsSettings};
use crate::error::{Error, Result};

/// The user and password of the master, when they are not the sentinels'.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct MasterCredentials {
    /// `None`: the `default` user.
    pub(crate) username: Option<String>,
    pub(crate) password: String,
}

impl fmt::Debug for MasterCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MasterCredentials")
            .field("username", &self.username)
            .field("password", &"***")
            .finish()
    }
}

/// The sentinels and the recipe for a connection to the master they name; made by
/// [`Settings::validated`](crate::config::settings::Settings::validated).
#[derive(Clone)]
pub(crate) struct SentinelEndpoints {
    /// One per sentinel URL, in the order given, on database 0.
    pub(crate) sentinels: Vec<redis::Client>,
    /// What messages name for each sentinel.
    pub(crate) sentinel_urls: Vec<ServerUrl>,
    /// The name the sentinels monitor the master under (`sentinel monitor <name> ...`).
    pub(crate) master_name: String,
    /// The first sentinel URL's connection info, with the master's credentials and
    /// database: only its address changes from one master to the next.
    master_template: redis::ConnectionInfo,
    tls: TlsSettings,
}

impl SentinelEndpoints {
    pub(crate) fn new(
        sentinel_urls: &[ServerUrl],
        master_name: &str,
        credentials: Option<&MasterCredentials>,
        tls: &TlsSettings,
    ) -> Result<Self> {
        use redis::IntoConnectionInfo;
        if sentinel_urls.is_empty() {
            return Err(Error::invalid(
                "a Sentinel client needs at least one sentinel URL",
            ));
        }
        if master_name.is_empty() || master_name.len() > 1024 {
            return Err(Error::invalid(
                "the Sentinel master name must be 1 to 1,024 bytes long",
            ));
        }
        let mut sentinels = Vec::with_capacity(sentinel_urls.len());
        let mut template = None;
        for url in sentinel_urls {
            let info = url.raw().into_connection_info();
            let info = info.map_err(|e| url.invalid("sentinel URL", &e))?;
            if matches!(info.addr(), redis::ConnectionAddr::Unix(_)) {
                return Err(Error::invalid(format!(
                    "sentinel URL `{url}`: sentinels name masters by host and port, so a \
                     Sentinel client connects over TCP"
                )));
            }
            let master = master_settings(info.redis_settings(), credentials);
            let sentinel_info = info
                .clone()
                .set_redis_settings(info.redis_settings().clone().set_db(0));
            sentinels.push(client_with_tls(tls, url, sentinel_info)?);
            template.get_or_insert_with(|| info.set_redis_settings(master));
        }
        Ok(SentinelEndpoints {
            sentinels,
            sentinel_urls: sentinel_urls.to_vec(),
            master_name: master_name.to_string(),
            master_template: template.expect("at least one sentinel URL"),
            tls: tls.clone(),
        })
    }

    /// A client for the master at `host:port`, and how messages name it.
    pub(crate) fn master(&self, host: &str, port: u16) -> Result<(redis::Client, ServerUrl)> {
        let info = at_address(&self.master_template, host, port);
        let scheme = match info.addr() {
            redis::ConnectionAddr::TcpTls { .. } => "rediss",
            _ => "redis",
        };
        let label = ServerUrl::new(format!("{scheme}://{}", host_port(host, port)));
        Ok((client_with_tls(&self.tls, &label, info)?, label))
    }
}

/// `host:port`, with an IPv6 address in brackets.
pub(crate) fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The master's connection settings: the sentinel URL's (database included), with other
/// credentials when given.
fn master_settings(
    from_url: &redis::RedisConnectionInfo,
    credentials: Option<&MasterCredentials>,
) -> redis::RedisConnectionInfo {
    let Some(credentials) = credentials else {
        return from_url.clone();
    };
    let mut settings = redis::RedisConnectionInfo::default()
        .set_db(from_url.db())
        .set_protocol(from_url.protocol())
        .set_password(&credentials.password);
    if let Some(username) = &credentials.username {
        settings = settings.set_username(username);
    }
    settings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoints(urls: &[&str], credentials: Option<MasterCredentials>) -> SentinelEndpoints {
        let urls: Vec<ServerUrl> = urls.iter().map(|u| ServerUrl::new(*u)).collect();
        SentinelEndpoints::new(&urls, "m1", credentials.as_ref(), &TlsSettings::default()).unwrap()
    }

    #[test]
    fn the_master_gets_the_urls_credentials_and_database_and_the_sentinels_database_0() {
        let e = endpoints(&["redis://u:pw@127.0.0.1:26379/3"], None);
        let sentinel = e.sentinels[0].get_connection_info().redis_settings();
        assert_eq!((sentinel.db(), sentinel.password()), (0, Some("pw")));
        let (master, label) = e.master("10.0.0.7", 6380).unwrap();
        let info = master.get_connection_info();
        assert_eq!(
            info.addr(),
            &redis::ConnectionAddr::Tcp("10.0.0.7".into(), 6380)
        );
        let settings = info.redis_settings();
        assert_eq!(
            (settings.db(), settings.username(), settings.password()),
            (3, Some("u"), Some("pw"))
        );
        assert_eq!(label.to_string(), "redis://10.0.0.7:6380");
    }

    #[test]
    fn master_credentials_replace_the_sentinels_for_the_master_only() {
        let credentials = MasterCredentials {
            username: None,
            password: "master-secret".into(),
        };
        let e = endpoints(&["redis://127.0.0.1:26379/2"], Some(credentials.clone()));
        assert_eq!(
            e.sentinels[0]
                .get_connection_info()
                .redis_settings()
                .password(),
            None
        );
        let (master, _) = e.master("::1", 7000).unwrap();
        let settings = master.get_connection_info().redis_settings().clone();
        assert_eq!(
            (settings.db(), settings.username(), settings.password()),
            (2, None, Some("master-secret"))
        );
        assert!(!format!("{credentials:?}").contains("master-secret"));
        assert_eq!(host_port("::1", 7000), "[::1]:7000");
    }

    #[test]
    fn bad_sentinel_settings_are_refused() {
        let tls = TlsSettings::default();
        let none: Vec<ServerUrl> = Vec::new();
        assert!(SentinelEndpoints::new(&none, "m1", None, &tls).is_err());
        let one = [ServerUrl::new("redis://127.0.0.1:26379")];
        assert!(SentinelEndpoints::new(&one, "", None, &tls).is_err());
        let unix = [ServerUrl::new("redis+unix:///tmp/s.sock")];
        assert!(SentinelEndpoints::new(&unix, "m1", None, &tls).is_err());
        let bad = [ServerUrl::new("redis://:hunter2@[bad")];
        let error = SentinelEndpoints::new(&bad, "m1", None, &tls)
            .err()
            .unwrap()
            .to_string();
        assert!(!error.contains("hunter2"), "{error}");
    }
}
