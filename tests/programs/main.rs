//! The programs and documents around the library: the quickstart example, the layering of
//! `src/`, and the links in the Markdown files.
//!
//! One test binary for these files (each a module), so that the suite links a few
//! binaries rather than one per file. TESTING.md says what each file proves.

mod doc_links;
mod layering;
mod quickstart;
