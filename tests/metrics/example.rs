//! `examples/metrics.rs`, run and scraped over HTTP as Prometheus text.

use super::*;

/// `examples/metrics.rs` serves the metrics as Prometheus text: scraped over HTTP while its
/// workers run, it shows the acquires, the releases and the held-locks gauge.
#[test]
fn the_example_serves_prometheus_text() {
    let (mut child, address) = run_example("5");
    assert!(address.starts_with("127.0.0.1:"), "{address}");

    let wanted = [
        "# TYPE rlock_acquires_total counter",
        "rlock_acquires_total{kind=\"reentrant\",outcome=\"acquired\",class=\"default\"}",
        "rlock_releases_total{kind=\"reentrant\",outcome=\"freed\",class=\"default\"}",
        "rlock_acquire_wait_seconds",
        "rlock_hold_seconds",
        "rlock_held_locks",
        // The documented buckets: histograms, not summaries.
        "rlock_acquire_wait_seconds_bucket{kind=\"reentrant\",outcome=\"acquired\",class=\"default\",le=\"5\"}",
        "rlock_hold_seconds_bucket{kind=\"reentrant\",class=\"default\",le=\"30\"}",
        // Made at zero, and the workers' own deadlines counted apart.
        "rlock_locks_lost_total{reason=\"expired\",class=\"default\"} 0",
        "rlock_wakeups_total{source=\"deadline\"}",
    ];
    let text = settles_to_text(&address, &wanted);
    for line in wanted {
        assert!(text.contains(line), "no `{line}` in:\n{text}");
    }
    assert!(!text.contains("metrics:example"), "a lock name in:\n{text}");
    let status = child.wait().expect("the example ends");
    assert!(status.success(), "{status}");
}

/// Scrapes `/metrics` until it shows every `wanted` line (within [`GENEROUS`]).
fn settles_to_text(address: &str, wanted: &[&str]) -> String {
    let end = Instant::now() + GENEROUS;
    loop {
        let text = scrape(address).unwrap_or_default();
        if wanted.iter().all(|w| text.contains(w)) || Instant::now() > end {
            return text;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Starts `examples/metrics.rs` for `seconds`, its own throwaway `redis-server` and all
/// (no `REDIS_URL`), and returns it with the address it serves its metrics on.
pub(super) fn run_example(seconds: &str) -> (std::process::Child, String) {
    let mut child = Command::new(example_binary("metrics"))
        .args(["--seconds", seconds])
        .env_remove("REDIS_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run the metrics example");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().expect("a first line").unwrap();
    let address = first
        .strip_prefix("serving http://")
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("unexpected first line: {first}"))
        .to_string();
    // The rest of what it prints is read and dropped: a closed pipe would fail its prints.
    std::thread::spawn(move || lines.for_each(drop));
    (child, address)
}

/// One `GET /metrics` from the example at `address`: the whole HTTP response.
pub(super) fn scrape(address: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    Ok(response)
}

/// `target/<profile>/examples/NAME`, next to this test's `target/<profile>/deps/`:
/// `cargo test --features metrics` builds the example too.
fn example_binary(name: &str) -> PathBuf {
    let test_binary = std::env::current_exe().expect("path of the test binary");
    let profile_dir = test_binary
        .parent()
        .and_then(Path::parent)
        .expect("the test binary lives in target/<profile>/deps");
    let binary = profile_dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        binary.is_file(),
        "no example binary at {}: `cargo test --features metrics` builds it (with `--test \
         metrics` alone it does not: run `cargo build --features metrics --example {name}`)",
        binary.display()
    );
    binary
}
