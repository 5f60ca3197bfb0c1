//! One module per command; each connects, reads through [`inspect`](crate::inspect), and
//! prints through [`render`](crate::render).

pub mod deadlocks;
pub mod leaks;
pub mod list;
pub mod show;
pub mod unlock;
pub mod watch;

/// Prints a finding command's report, JSON or text, and its exit code: 1 when it found
/// something (`leaks`, `deadlocks`), 0 otherwise.
pub fn report<T: serde::Serialize>(
    report: &T,
    json: bool,
    text: impl Fn(&T) -> String,
    found: bool,
) -> crate::exit::Exit {
    if json {
        println!("{}", crate::render::json(report));
    } else {
        print!("{}", text(report));
    }
    match found {
        true => crate::exit::Exit::Found,
        false => crate::exit::Exit::Ok,
    }
}
