//! Printing: one JSON line per measured contender, and human tables.

use std::fmt::Display;

/// One JSON line, built field by field, printed by [`Json::print`].
pub struct Json(String);

impl Json {
    pub fn new(workload: &str) -> Json {
        Json(format!("{{\"workload\":\"{workload}\""))
    }

    /// A string field.
    pub fn str(mut self, name: &str, value: &str) -> Json {
        self.0.push_str(&format!(",\"{name}\":\"{value}\""));
        self
    }

    /// A number with `decimals` digits after the point.
    pub fn num(mut self, name: &str, value: f64, decimals: usize) -> Json {
        self.0.push_str(&format!(",\"{name}\":{value:.decimals$}"));
        self
    }

    /// A field written as it displays: an integer, a boolean, `null`.
    pub fn raw(mut self, name: &str, value: impl Display) -> Json {
        self.0.push_str(&format!(",\"{name}\":{value}"));
        self
    }

    pub fn print(self) {
        println!("{}}}", self.0);
    }
}

/// A human table: the first column left-aligned, the others right-aligned, each at least
/// its width.
pub struct Table {
    widths: Vec<usize>,
}

impl Table {
    /// Prints a blank line, `title` and the header row.
    pub fn new(title: &str, columns: &[(&str, usize)]) -> Table {
        println!();
        println!("{title}");
        let table = Table {
            widths: columns.iter().map(|(_, width)| *width).collect(),
        };
        table.row(
            &columns
                .iter()
                .map(|(name, _)| name.to_string())
                .collect::<Vec<_>>(),
        );
        table
    }

    /// Prints one row of already formatted cells.
    pub fn row(&self, cells: &[String]) {
        let mut line = String::new();
        for (i, (cell, width)) in cells.iter().zip(&self.widths).enumerate() {
            if i == 0 {
                line.push_str(&format!("{cell:<width$}"));
            } else {
                line.push_str(&format!(" {cell:>width$}"));
            }
        }
        println!("{}", line.trim_end());
    }
}

/// `value` with `decimals` digits after the point, for a table cell.
pub fn fixed(value: f64, decimals: usize) -> String {
    format!("{value:.decimals$}")
}
