//! A client's settings as checked and used inside the crate ([`settings`]), and its server
//! URL, which never shows its password ([`server_url`]). The public builder that makes
//! them is [`ClientBuilder`](crate::ClientBuilder).

pub(crate) mod sentinel;
pub(crate) mod server_url;
pub(crate) mod settings;
