//! Secrets never appear in what the crate prints: `Debug` of the builder, the client, the
//! locks and the guards, and error messages. Log lines: `tests/log_redaction.rs`.

use redis_rlock::Client;
use testkit::RedisServer;

const SECRET: &str = "s3cret-Pa55word";

/// A server with a user `app` whose password is [`SECRET`].
fn server_with_password() -> RedisServer {
    let server = RedisServer::start();
    let set = format!(">{SECRET}");
    server.cli(&["ACL", "SETUSER", "app", "on", &set, "~*", "&*", "+@all"]);
    server
}

fn url_of(server: &RedisServer) -> String {
    format!("redis://app:{SECRET}@127.0.0.1:{}", server.port())
}

#[tokio::test]
async fn debug_output_shows_the_url_without_its_password() {
    let server = server_with_password();
    let builder = Client::builder(url_of(&server));
    let printed = format!("{builder:?}");
    assert!(!printed.contains(SECRET), "{printed}");
    assert!(printed.contains("redis://app:***@127.0.0.1"), "{printed}");

    let client = builder.build().await.unwrap();
    let lock = client.lock("order:1");
    let guard = lock.lock().await.unwrap();
    for printed in [
        format!("{client:?}"),
        format!("{client:#?}"),
        format!("{lock:?}"),
        format!("{guard:?}"),
    ] {
        assert!(!printed.contains(SECRET), "{printed}");
    }
    assert!(format!("{client:?}").contains("app:***@"));
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn errors_about_a_url_never_quote_its_password() {
    let bad_urls = [
        format!("redis://:{SECRET}@127.0.0.1:notaport"),
        format!("redis://app:{SECRET}@[::1/"),
        format!("redis://app:{SECRET}@127.0.0.1:6379/notadb"),
        format!("redis+unix:///nonexistent.sock?pass={SECRET}&db=x"),
        format!("http://app:{SECRET}@127.0.0.1:6379"),
    ];
    for url in bad_urls {
        let err = Client::connect(url.as_str()).await.unwrap_err();
        let printed = format!("{err} / {err:?}");
        assert!(err.is_invalid_argument(), "{url}: {printed}");
        assert!(!printed.contains(SECRET), "{printed}");
    }
}

#[tokio::test]
async fn refused_credentials_are_final_and_never_quoted() {
    let server = server_with_password();
    let wrong = format!("redis://app:{SECRET}-wrong@127.0.0.1:{}", server.port());
    let err = Client::connect(wrong.as_str()).await.unwrap_err();
    assert!(err.is_auth_error(), "{err:?}");
    assert!(!err.is_connection_error(), "retrying cannot help: {err:?}");
    assert!(!format!("{err} {err:?}").contains(SECRET));

    // No password at all for a server that requires one: NOAUTH.
    server.cli(&["CONFIG", "SET", "requirepass", SECRET]);
    let err = Client::connect(server.url()).await.unwrap_err();
    assert!(err.is_auth_error(), "{err:?}");
    assert!(!err.is_connection_error(), "{err:?}");
}

#[tokio::test]
async fn sentinel_clients_print_neither_the_sentinels_nor_the_masters_password() {
    let dead = RedisServer::start();
    let sentinel = format!("redis://:{SECRET}@127.0.0.1:{}", dead.port());
    drop(dead);
    let builder = Client::sentinel_builder([sentinel.as_str()], "m1")
        .master_credentials(Some("app"), "other-Pa55word")
        .connect_timeout(std::time::Duration::from_millis(300));
    let printed = format!("{builder:?}");
    assert!(!printed.contains(SECRET), "{printed}");
    assert!(!printed.contains("other-Pa55word"), "{printed}");
    assert!(printed.contains("***"), "{printed}");
    // Nobody answers at that port: the error names the sentinel without its password.
    let err = builder.build().await.unwrap_err();
    let printed = format!("{err} / {err:?}");
    assert!(err.is_connection_error(), "{printed}");
    assert!(!printed.contains(SECRET), "{printed}");
}
