//! `examples/monitoring/`: the alert rules, their `promtool` tests and the Grafana
//! dashboard use only series the crate serves. `promtool` checks that the rules parse and
//! fire on the series of their tests, but not that those series are real: a renamed metric
//! or label value would leave rules that never fire. So the metrics example is run and
//! scraped, and every metric name, label name and label value the three files use must be
//! in what it served.

use std::collections::HashSet;

use super::example::{run_example, scrape};
use super::*;

/// Labels Prometheus adds to every series it scrapes (the target's), not the crate's.
const TARGET_LABELS: [&str; 2] = ["job", "instance"];

/// What the metrics example served, and the three files read against it.
#[test]
fn the_monitoring_files_use_only_what_the_example_serves() {
    let rules = monitoring_file("rlock.rules.yml");
    let rules_test = monitoring_file("rlock.rules.test.yml");
    let dashboard: serde_json::Value =
        serde_json::from_str(&monitoring_file("grafana-dashboard.json"))
            .expect("the dashboard is JSON");
    let input_series = yaml_values(&rules_test, "series");
    assert!(
        !input_series.is_empty(),
        "no input series in the rules test"
    );
    let wanted: Vec<Series> = input_series.iter().map(|s| crate_series(s)).collect();
    let all_text = [rules.as_str(), &rules_test, &dashboard.to_string()].concat();
    let names: HashSet<&str> = tokens(&all_text)
        .into_iter()
        .filter(|token| token.starts_with("rlock_"))
        .collect();
    // The histograms appear with their first sample: the example's first acquire and
    // release.
    let served = scrape_the_example(|served| {
        names.iter().all(|name| served.names.contains(*name))
            && wanted.iter().all(|series| served.series.contains(series))
    });

    // The rules: their expressions, and the labels their annotations print.
    served.check_names("rlock.rules.yml", &rules);
    for expr in yaml_values(&rules, "expr") {
        served.check_query("rlock.rules.yml", &expr);
    }
    for label in between(&rules, "$labels.", |c| !is_name_char(c)) {
        served.check_label_name("rlock.rules.yml", label);
    }

    // The rules' tests: each input series is one the example served, label for label.
    served.check_names("rlock.rules.test.yml", &rules_test);
    for (series, wanted) in input_series.iter().zip(&wanted) {
        assert!(
            served.series.contains(wanted),
            "rlock.rules.test.yml: `{series}` is not a series the example serves \
             (target labels aside: {wanted:?})"
        );
    }
    let tested: HashSet<String> = yaml_values(&rules_test, "alertname").into_iter().collect();
    for alert in yaml_values(&rules, "alert") {
        assert!(tested.contains(&alert), "no promtool test of {alert}");
    }

    // The dashboard: its queries, variables and legends.
    let mut strings = Vec::new();
    json_strings(&dashboard, "", &mut strings);
    for (key, text) in &strings {
        served.check_names("grafana-dashboard.json", text);
        match key.as_str() {
            "expr" | "definition" | "query" => served.check_query("grafana-dashboard.json", text),
            "legendFormat" => {
                for label in between(text, "{{", |c| c == '}') {
                    served.check_label_name("grafana-dashboard.json", label.trim());
                }
            }
            _ => {}
        }
    }
}

/// The dashboard imports as Grafana expects it, onto the data source the importer picks,
/// and each alert's runbook link leads to a section of the `operations` docs.
#[test]
fn the_dashboard_imports_and_the_runbooks_exist() {
    let dashboard: serde_json::Value =
        serde_json::from_str(&monitoring_file("grafana-dashboard.json"))
            .expect("the dashboard is JSON");
    let schema = dashboard["schemaVersion"].as_u64().unwrap_or(0);
    assert!(schema >= 36, "schemaVersion {schema}");
    assert!(
        dashboard["__inputs"]
            .as_array()
            .is_some_and(|inputs| inputs.iter().any(|input| input["name"] == "DS_PROMETHEUS")),
        "no DS_PROMETHEUS input"
    );
    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(!panels.is_empty());
    for panel in panels {
        let targets = panel["targets"].as_array().expect("targets");
        for source in std::iter::once(panel).chain(targets) {
            assert_eq!(
                source["datasource"]["uid"], "${DS_PROMETHEUS}",
                "{}: not on the imported data source",
                panel["title"]
            );
        }
    }

    let docs =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/operations.rs"))
            .expect("read src/operations.rs");
    // Rustdoc's ids for headings of plain words, as the runbooks' are: lower case, spaces
    // as `-`.
    let anchors: HashSet<String> = docs
        .lines()
        .filter_map(|line| line.strip_prefix("//! #"))
        .map(|heading| {
            heading
                .trim_start_matches('#')
                .trim()
                .to_lowercase()
                .replace(' ', "-")
        })
        .collect();
    let rules = monitoring_file("rlock.rules.yml");
    let runbooks = yaml_values(&rules, "runbook_url");
    assert_eq!(
        runbooks.len(),
        yaml_values(&rules, "alert").len(),
        "an alert without a runbook"
    );
    for url in runbooks {
        let anchor = url.rsplit_once('#').map(|(_, a)| a).unwrap_or_default();
        assert!(
            anchors.contains(anchor),
            "{url}: no such heading in the operations docs"
        );
    }
}

/// What one scrape of the example held: every metric name, and every series.
struct Served {
    /// Series names, and the names of `# TYPE` lines (a histogram's own name).
    names: HashSet<String>,
    /// (name, labels as `k=v`, sorted).
    series: HashSet<Series>,
}

impl Served {
    fn from(text: &str) -> Served {
        let series: HashSet<Series> = series_in(text).into_keys().collect();
        let mut names: HashSet<String> = series.iter().map(|(name, _)| name.clone()).collect();
        names.extend(
            text.lines()
                .filter_map(|line| line.strip_prefix("# TYPE "))
                .filter_map(|line| line.split(' ').next())
                .map(str::to_string),
        );
        Served { names, series }
    }

    /// Every `rlock_` name in `text` is one the example served.
    fn check_names(&self, file: &str, text: &str) {
        for token in tokens(text) {
            if token.starts_with("rlock_") {
                assert!(
                    self.names.contains(token),
                    "{file}: `{token}` is not served"
                );
            }
        }
    }

    fn check_label_name(&self, file: &str, label: &str) {
        let served = TARGET_LABELS.contains(&label)
            || self
                .series
                .iter()
                .flat_map(|(_, labels)| labels)
                .any(|l| l.split_once('=').map(|(name, _)| name) == Some(label));
        assert!(served, "{file}: the label `{label}` is not served");
    }

    /// A label value the example served on a series of `metric`.
    fn serves_value(&self, metric: &str, label: &str, value: &str) -> bool {
        let wanted = format!("{label}={value}");
        self.series
            .iter()
            .any(|(name, labels)| name == metric && labels.contains(&wanted))
    }

    /// A PromQL query: the labels of its selectors, with their values, and of its
    /// `by (...)`, `without (...)`, `on (...)`, `ignoring (...)` and `label_values(..., x)`.
    fn check_query(&self, file: &str, query: &str) {
        for (metric, matchers) in selectors(query) {
            for matcher in matchers.split(',').map(str::trim).filter(|m| !m.is_empty()) {
                let at = matcher.find(['=', '!']).expect("a matcher's operator");
                let (label, rest) = matcher.split_at(at);
                let regex = rest.starts_with("=~") || rest.starts_with("!~");
                let value = rest
                    .trim_start_matches(['=', '!', '~'])
                    .trim()
                    .trim_matches('"');
                let label = label.trim();
                self.check_label_name(file, label);
                // A target label's or a dashboard variable's value is not the crate's.
                if TARGET_LABELS.contains(&label) || value.starts_with('$') {
                    continue;
                }
                let values: Vec<&str> = if regex {
                    value.split('|').collect()
                } else {
                    vec![value]
                };
                for value in values {
                    assert!(
                        value.chars().all(is_name_char),
                        "{file}: `{matcher}`: only plain alternatives are checked"
                    );
                    assert!(
                        self.serves_value(&metric, label, value),
                        "{file}: `{metric}` is not served with `{label}=\"{value}\"`"
                    );
                }
            }
        }
        for label in grouping_labels(query) {
            self.check_label_name(file, label);
        }
        for call in between(query, "label_values(", |c| c == ')') {
            if let Some((_, label)) = call.rsplit_once(',') {
                self.check_label_name(file, label.trim());
            }
        }
    }
}

/// Runs `examples/metrics.rs` (as `example.rs` does) and scrapes `/metrics` until what it
/// serves is `ready`, or [`GENEROUS`] has passed; returns the last scrape.
fn scrape_the_example(ready: impl Fn(&Served) -> bool) -> Served {
    let (mut child, address) = run_example("5");
    let end = Instant::now() + GENEROUS;
    let mut served = Served::from("");
    while !ready(&served) && Instant::now() < end {
        if let Ok(body) = scrape(&address) {
            served = Served::from(&body);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // Its own end: killing it would leave its throwaway redis-server behind.
    let status = child.wait().expect("the example ends");
    assert!(status.success(), "{status}");
    served
}

fn monitoring_file(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/monitoring")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The values of `key:` in a YAML file, inline (quotes taken off) or as a block scalar
/// (`|`, `>-`: the more indented lines that follow, joined). Enough for these files, which
/// have no flow collections or anchors.
fn yaml_values(text: &str, key: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut values = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let body = line.trim_start();
        let indent = line.len() - body.len();
        let body = body.strip_prefix("- ").unwrap_or(body);
        let Some(value) = body
            .strip_prefix(key)
            .and_then(|rest| rest.strip_prefix(':'))
        else {
            continue;
        };
        let value = value.trim();
        if value.starts_with(['|', '>']) {
            let block: Vec<&str> = lines[i + 1..]
                .iter()
                .take_while(|next| {
                    next.trim().is_empty() || next.len() - next.trim_start().len() > indent
                })
                .map(|next| next.trim())
                .collect();
            values.push(block.join(" ").trim().to_string());
        } else {
            values.push(value.trim_matches(['\'', '"']).to_string());
        }
    }
    values
}

/// Every string of a JSON document, with the key it is the value of (an array's items
/// take the array's key).
fn json_strings(value: &serde_json::Value, key: &str, out: &mut Vec<(String, String)>) {
    match value {
        serde_json::Value::String(text) => out.push((key.to_string(), text.clone())),
        serde_json::Value::Array(items) => {
            for item in items {
                json_strings(item, key, out);
            }
        }
        serde_json::Value::Object(fields) => {
            for (key, field) in fields {
                json_strings(field, key, out);
            }
        }
        _ => {}
    }
}

/// A series as the rules test writes it, `name{k="v",...}`, as the crate would serve it:
/// the target's labels left out, the others as `k=v`, sorted.
fn crate_series(series: &str) -> Series {
    let (name, labels) = series.split_once('{').unwrap_or((series, ""));
    let mut labels: Vec<String> = labels
        .trim_end_matches('}')
        .split(',')
        .map(|label| label.trim().replace('"', ""))
        .filter(|label| {
            let name = label.split('=').next().unwrap_or_default();
            !label.is_empty() && !TARGET_LABELS.contains(&name)
        })
        .collect();
    labels.sort();
    (name.trim().to_string(), labels)
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// The names in `text`: its longest runs of letters, digits, `_` and `:`.
fn tokens(text: &str) -> Vec<&str> {
    text.split(|c: char| !is_name_char(c))
        .filter(|token| !token.is_empty())
        .collect()
}

/// The labels of a query's `by (...)`, `without (...)`, `on (...)` and `ignoring (...)`.
fn grouping_labels(query: &str) -> Vec<&str> {
    let mut labels = Vec::new();
    for keyword in ["by", "without", "on", "ignoring"] {
        for (at, _) in query.match_indices(keyword) {
            let whole_word = !query[..at].chars().next_back().is_some_and(is_name_char);
            let rest = query[at + keyword.len()..].trim_start();
            if let (true, Some(list)) = (whole_word, rest.strip_prefix('(')) {
                let list = list.split(')').next().unwrap_or_default();
                labels.extend(list.split(',').map(str::trim).filter(|l| !l.is_empty()));
            }
        }
    }
    labels
}

/// What follows each `open` in `text`, up to the first character `end` accepts.
fn between<'a>(text: &'a str, open: &str, end: impl Fn(char) -> bool) -> Vec<&'a str> {
    text.match_indices(open)
        .map(|(at, _)| {
            let rest = &text[at + open.len()..];
            rest.find(&end).map_or(rest, |stop| &rest[..stop])
        })
        .collect()
}

/// The selectors of a query that have matchers: each `rlock_...{...}`, as the metric's
/// name and what is between the braces.
fn selectors(query: &str) -> Vec<(String, &str)> {
    query
        .match_indices("rlock_")
        .filter(|(at, _)| !query[..*at].chars().next_back().is_some_and(is_name_char))
        .filter_map(|(at, _)| {
            let rest = &query[at..];
            let name_end = rest.find(|c: char| !is_name_char(c))?;
            let matchers = rest[name_end..].strip_prefix('{')?;
            let close = matchers.find('}')?;
            Some((rest[..name_end].to_string(), &matchers[..close]))
        })
        .collect()
}
