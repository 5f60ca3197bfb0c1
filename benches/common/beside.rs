//! `benches/redisson.rs`'s results: one row per contender, the crate's (on each runtime
//! flavour) and Redisson's (in its JVM) alike, printed as JSON lines and a table, each with
//! what Redis spent on it and its ratios to the crate's lock of the same kind measured in
//! the same run.

use serde_json::Value;

use crate::common::redis_use::Spent;
use crate::common::report::{fixed, Json, Table};

/// Which of the crate's locks a contender is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `RLock` (the raw floor, Redisson's `RLock`).
    Lock,
    /// `FairLock` (Redisson's `RFairLock`).
    Fair,
}

/// One figure of a workload: its JSON name, table header and width, decimals.
pub type Field = (&'static str, &'static str, usize, usize);

/// The runtimes the crate's contenders run on, in the ratio columns.
pub const FLAVOURS: [&str; 2] = ["current_thread", "multi_thread"];

/// What was measured of one contender.
pub struct Row {
    /// `floor`, `lock`, `fair` (the crate's side) or `redisson_…`.
    pub id: &'static str,
    pub name: &'static str,
    /// The crate's runtime flavour, or `jvm`.
    pub runtime: &'static str,
    pub kind: Kind,
    /// Pairs (W3: acquisitions) measured, what the Redis figures are per.
    pub pairs: f64,
    /// The workload's [`Field`]s, in order; the first is what the ratios compare.
    pub values: Vec<f64>,
    pub per_task: Option<(usize, usize)>,
    pub redis: Spent,
    /// Redisson's result line, for its JIT warm-up.
    pub jvm: Option<Value>,
}

impl Row {
    /// A row of Redisson's from its result line: `fields` read by their JSON names, the
    /// pairs from `pairs` (W3: `acquisitions`).
    pub fn of_jvm(
        id: &'static str,
        name: &'static str,
        kind: Kind,
        result: Value,
        fields: &[Field],
        redis: Spent,
    ) -> Row {
        let number = |name: &str| result[name].as_f64().unwrap_or(f64::NAN);
        let per_task = result["per_task_min"].as_u64().map(|min| {
            let max = result["per_task_max"].as_u64().unwrap_or(min);
            (min as usize, max as usize)
        });
        Row {
            id,
            name,
            runtime: "jvm",
            kind,
            pairs: number("pairs").max(number("acquisitions")),
            values: fields.iter().map(|(field, ..)| number(field)).collect(),
            per_task,
            redis,
            jvm: Some(result),
        }
    }
}

/// The first figure of the crate's lock of `kind` on `flavour`, NaN when it did not run.
fn crate_figure(rows: &[Row], kind: Kind, flavour: &str) -> f64 {
    let id = match kind {
        Kind::Lock => "lock",
        Kind::Fair => "fair",
    };
    rows.iter()
        .find(|row| row.id == id && row.runtime == flavour)
        .map_or(f64::NAN, |row| row.values[0])
}

/// A number with `decimals` digits, or `null` (JSON) when there is none.
fn json_num(json: Json, name: &str, value: f64, decimals: usize) -> Json {
    if value.is_finite() {
        json.num(name, value, decimals)
    } else {
        json.raw(name, "null")
    }
}

fn cell(value: f64, decimals: usize) -> String {
    if value.is_finite() {
        fixed(value, decimals)
    } else {
        "—".to_string()
    }
}

/// Prints `rows` of `workload` (`W1`): a JSON line each, a table titled `title`, and the
/// commands Redis ran per pair, by name.
pub fn print(workload: &str, title: &str, fields: &[Field], rows: &[Row], pinned: bool) {
    let ratios = |row: &Row| FLAVOURS.map(|f| row.values[0] / crate_figure(rows, row.kind, f));
    for row in rows {
        let mut json = Json::new(workload)
            .str("contender", row.name)
            .str("contender_id", row.id)
            .str("runtime", row.runtime)
            .num("pairs", row.pairs, 0);
        for ((name, _, _, decimals), value) in fields.iter().zip(&row.values) {
            json = json_num(json, name, *value, *decimals);
        }
        if let Some((min, max)) = row.per_task {
            json = json.raw("per_task_min", min).raw("per_task_max", max);
        }
        json = json
            .num(
                "redis_commands_per_pair",
                row.redis.commands_per(row.pairs),
                2,
            )
            .num("redis_cpu_us_per_pair", row.redis.cpu_us_per(row.pairs), 2)
            .str("redis_commands", &row.redis.by_command(row.pairs));
        for (flavour, ratio) in FLAVOURS.iter().zip(ratios(row)) {
            json = json_num(json, &format!("ratio_to_crate_{flavour}"), ratio, 3);
        }
        if let Some(jvm) = &row.jvm {
            json = json
                .raw("warmup_s", &jvm["warmup_s"])
                .raw("jit_quiet", &jvm["jit_quiet"])
                .raw("jit_compilation_ms", &jvm["jit_compilation_ms"]);
        }
        json.raw("pinned", pinned).print();
    }
    let mut columns = vec![("contender", 26), ("runtime", 14)];
    columns.extend(fields.iter().map(|(_, header, width, _)| (*header, *width)));
    if rows.iter().any(|row| row.per_task.is_some()) {
        columns.push(("per task", 11));
    }
    columns.extend([
        ("cmds/pair", 9),
        ("Redis µs/pair", 13),
        ("×crate ct", 9),
        ("×crate mt", 9),
    ]);
    let table = Table::new(title, &columns);
    for row in rows {
        let mut cells = vec![row.name.to_string(), row.runtime.to_string()];
        cells.extend(
            fields
                .iter()
                .zip(&row.values)
                .map(|((.., decimals), value)| cell(*value, *decimals)),
        );
        if let Some((min, max)) = row.per_task {
            cells.push(format!("{min}–{max}"));
        }
        cells.push(fixed(row.redis.commands_per(row.pairs), 2));
        cells.push(fixed(row.redis.cpu_us_per(row.pairs), 2));
        cells.extend(ratios(row).map(|ratio| cell(ratio, 2)));
        table.row(&cells);
    }
    println!("\nRedis commands per pair (INFO commandstats, those run by scripts included):");
    for row in rows {
        println!(
            "  {} ({}): {}",
            row.name,
            row.runtime,
            row.redis.by_command(row.pairs)
        );
    }
}
